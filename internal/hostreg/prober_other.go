//go:build !linux && !darwin

package hostreg

import "errors"

func processStart(int) (string, bool, error) {
	return "", false, errors.New("hostreg: process start times are not supported on this platform")
}
