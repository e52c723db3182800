package simsdk

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The emulator console over TCP, on the console port, as the real
// emulator serves it to `adb emu` (the real adb client connects there
// itself, reading the token from its own $HOME) and to telnet. The
// greeting asks for `auth <token>`, the token being the contents of
// ~/.emulator_console_auth_token, which the emulator creates at start
// when it is missing; an empty file turns authentication off, as it does
// for the real emulator. After auth, every line is a console command
// answered as `adb emu` answers (android_console.go); "quit" or "exit"
// ends the session.
//
// The greeting and the post-auth line follow the real console's words;
// the refusal of a command before auth is modelled.

const consoleTokenFile = ".emulator_console_auth_token"

// consoleMaxLine bounds one command line.
const consoleMaxLine = 4096

// consoleToken reads, or first creates, the auth token in home; "" means
// authentication is off.
func consoleToken(home string) (string, error) {
	if home == "" {
		return "", nil
	}
	p := filepath.Join(home, consoleTokenFile)
	b, err := os.ReadFile(p)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !isNotExist(err) {
		return "", err
	}
	raw := make([]byte, 12)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	tok := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.WriteFile(p, []byte(tok), 0o600); err != nil {
		return "", err
	}
	return tok, nil
}

// serveConsole answers console sessions on l until ctx ends.
func (s *sdk) serveConsole(ctx context.Context, l net.Listener, dir, token, tokenPath string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stopConn := context.AfterFunc(cctx, func() { _ = c.Close() })
			defer stopConn()
			s.consoleSession(cctx, c, dir, token, tokenPath)
		}()
	}
}

func (s *sdk) consoleSession(ctx context.Context, rw io.ReadWriter, dir, token, tokenPath string) {
	authed := token == ""
	if authed {
		_, _ = io.WriteString(rw, consoleOK("Android Console: type 'help' for a list of commands"))
	} else {
		_, _ = io.WriteString(rw, consoleOK(
			"Android Console: Authentication required",
			"Android Console: type 'auth <auth_token>' to authenticate",
			"Android Console: you can find your <auth_token> in ",
			"'"+tokenPath+"'"))
	}
	sc := bufio.NewScanner(rw)
	sc.Buffer(make([]byte, 256), consoleMaxLine)
	for sc.Scan() {
		words := strings.Fields(sc.Text())
		if len(words) == 0 {
			continue
		}
		cmd := strings.ToLower(words[0])
		var reply string
		switch {
		case cmd == "quit" || cmd == "exit":
			return
		case cmd == "auth":
			if token == "" || (len(words) == 2 && words[1] == token) {
				authed = true
				reply = consoleOK("Android Console: type 'help' for a list of commands")
			} else {
				reply = consoleKO("authentication token does not match " + "'" + tokenPath + "'")
			}
		case !authed:
			reply = consoleKO("authentication required: type 'auth <auth_token>' first")
		default:
			r, err := readRun(dir)
			if err != nil {
				return // the device is gone
			}
			if reply, err = s.console(ctx, r, words); err != nil {
				reply = consoleKO(err.Error())
			}
		}
		if _, err := io.WriteString(rw, reply); err != nil {
			return
		}
		if cmd == "kill" && strings.HasPrefix(reply, "OK") {
			return
		}
	}
}
