package simsdk

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// adb connect HOST:PORT makes a server reach an emulator by its adb port
// (the console port plus one) over TCP, under the serial "HOST:PORT". A
// tool that only talks to the default server (Maestro, for one) can then
// see an emulator simlock runs on its private server. The connection
// belongs to that emulator process: a restarted emulator is not connected.

// connectAddr normalises HOST:PORT to a loopback address and its port.
func connectAddr(arg string) (string, int, bool) {
	host, p, ok := strings.Cut(arg, ":")
	if !ok {
		p, host = "5555", arg // adb's default port for connect
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, false
	}
	switch host {
	case "127.0.0.1", "localhost":
		return "127.0.0.1:" + strconv.Itoa(port), port, true
	}
	return host + ":" + strconv.Itoa(port), port, true
}

// emulatorOnADBPort finds the running emulator listening on adbPort.
func (s *sdk) emulatorOnADBPort(adbPort int) (*emuRun, error) {
	all, err := s.runningEmulators()
	if err != nil {
		return nil, err
	}
	for _, r := range all {
		if r.ConsolePort+1 == adbPort {
			return r, nil
		}
	}
	return nil, nil
}

func (s *sdk) adbConnect(o adbOpts, args []string) error {
	if len(args) != 1 {
		return adbError("adb: usage: adb connect HOST[:PORT]\n")
	}
	addr, port, ok := connectAddr(args[0])
	if !ok {
		return adbError(fmt.Sprintf("failed to resolve host: '%s'\n", args[0]))
	}
	r, err := s.emulatorOnADBPort(port)
	if err != nil {
		return err
	}
	if r == nil || !strings.HasPrefix(addr, "127.0.0.1:") {
		return adbError(fmt.Sprintf("failed to connect to '%s': Connection refused\n", addr))
	}
	already := false
	err = updateHomeState(s.home, func(st *homeState) (bool, error) {
		srv := st.ADBServers[serverKey(o.port)]
		if srv == nil {
			return false, nil
		}
		if srv.Connected[addr] == transportKey(r) {
			already = true
			return false, nil
		}
		if srv.Connected == nil {
			srv.Connected = map[string]string{}
		}
		srv.Connected[addr] = transportKey(r)
		return true, nil
	})
	if err != nil {
		return err
	}
	if already {
		_, err = fmt.Fprintf(s.stdout, "already connected to %s\n", addr)
	} else {
		_, err = fmt.Fprintf(s.stdout, "connected to %s\n", addr)
	}
	return err
}

func (s *sdk) adbDisconnect(o adbOpts, args []string) error {
	if len(args) > 1 {
		return adbError("adb: usage: adb disconnect [HOST[:PORT]]\n")
	}
	addr := ""
	if len(args) == 1 {
		var ok bool
		if addr, _, ok = connectAddr(args[0]); !ok {
			return adbError(fmt.Sprintf("error: no such device '%s'\n", args[0]))
		}
	}
	found := false
	err := updateHomeState(s.home, func(st *homeState) (bool, error) {
		srv := st.ADBServers[serverKey(o.port)]
		if srv == nil {
			return false, nil
		}
		if addr == "" {
			found, srv.Connected = true, nil
			return true, nil
		}
		if _, ok := srv.Connected[addr]; ok {
			found = true
			delete(srv.Connected, addr)
			return true, nil
		}
		return false, nil
	})
	switch {
	case err != nil:
		return err
	case addr == "":
		_, err = io.WriteString(s.stdout, "disconnected everything\n")
	case !found:
		return adbError(fmt.Sprintf("error: no such device '%s'\n", addr))
	default:
		_, err = fmt.Fprintf(s.stdout, "disconnected %s\n", addr)
	}
	return err
}

// connectedRuns are the emulators the server on port reaches through adb
// connect, by the address they were connected under; a connection whose
// emulator has since stopped or restarted is gone.
func (s *sdk) connectedRuns(port int) (map[string]*emuRun, error) {
	srv := s.serverState(port)
	if srv == nil || !srv.Running || len(srv.Connected) == 0 {
		return nil, nil
	}
	all, err := s.runningEmulators()
	if err != nil {
		return nil, err
	}
	out := map[string]*emuRun{}
	for addr, key := range srv.Connected {
		for _, r := range all {
			if transportKey(r) == key {
				out[addr] = r
			}
		}
	}
	return out, nil
}
