//go:build unix

package hostreg

import "syscall"

func syscallUmask(m int) int { return syscall.Umask(m) }
