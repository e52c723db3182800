package cli

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// Every process of one OS user is the same principal, so a later shell
// finds what an earlier one leased; SIMLOCK_PRINCIPAL replaces it.
func TestPrincipalIsTheOSUserUnlessSet(t *testing.T) {
	a := &app{env: Env{Getenv: envOf(nil)}}
	want := "cli:" + osUser(envOf(nil))
	if got := a.principal(); got != want {
		t.Fatalf("principal %q, want %q", got, want)
	}
	if strings.Contains(want, strconv.Itoa(os.Getpid())) {
		t.Fatalf("principal %q carries this process's pid", want)
	}
	a.env.Getenv = envOf(map[string]string{"SIMLOCK_PRINCIPAL": "agent-7"})
	if got := a.principal(); got != "agent-7" {
		t.Fatalf("principal %q, want SIMLOCK_PRINCIPAL's agent-7", got)
	}
}

func TestRequesterDefaults(t *testing.T) {
	perProcess := "cli:ann/" + strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		name, flag, url string
		env             map[string]string
		want            string
	}{
		{name: "person: one id per process under the principal", want: perProcess},
		{name: "the flag wins", flag: "job-1", env: map[string]string{"SIMLOCK_REQUESTER": "env"}, want: "job-1"},
		{name: "then SIMLOCK_REQUESTER", env: map[string]string{"SIMLOCK_REQUESTER": "env"}, want: "env"},
		// The daemon's default (the session's principal) is kept for
		// callers with an identity of their own.
		{name: "an agent's principal is its requester", env: map[string]string{"SIMLOCK_PRINCIPAL": "agent-7"}, want: ""},
		{name: "over HTTP the token decides", url: "http://x", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &app{env: Env{Getenv: envOf(tc.env)}, url: tc.url}
			if got := a.requester(tc.flag, "cli:ann"); got != tc.want {
				t.Fatalf("requester %q, want %q", got, tc.want)
			}
		})
	}
}
