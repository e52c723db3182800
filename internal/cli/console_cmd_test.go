package cli

import "testing"

// A wildcard listen address is not one a browser can open; the link names
// the loopback address of the same family instead.
func TestConsoleLinkNamesADialableAddress(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7420": "127.0.0.1:7420",
		"0.0.0.0:7420":   "127.0.0.1:7420",
		":7420":          "127.0.0.1:7420",
		"[::]:7420":      "[::1]:7420",
		"10.0.0.5:80":    "10.0.0.5:80",
		"[fe80::1]:8080": "[fe80::1]:8080",
	} {
		if got := dialable(in); got != want {
			t.Errorf("dialable(%q) = %q, want %q", in, got, want)
		}
	}
}
