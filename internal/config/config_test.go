package config

import (
	"strings"
	"testing"
)

func TestDefaultsAreValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownKeyIsAnError(t *testing.T) {
	_, err := Parse([]byte(`{"lease":{"defaultTtlMs":1000,"maxTTL":5}}`))
	if err == nil || !strings.Contains(err.Error(), "maxTTL") {
		t.Fatalf("got %v", err)
	}
}

func TestPartialFileKeepsDefaults(t *testing.T) {
	c, err := Parse([]byte(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Lease.DefaultTTLMs != 30*60*1000 || c.Capacity.Fixed.MaxRunning != 1 || c.Downloads.Policy != "on-request" {
		t.Fatalf("%+v", c)
	}
}

func TestValidationNamesEveryProblem(t *testing.T) {
	_, err := Parse([]byte(`{"downloads":{"policy":"sometimes"},"log":{"level":"loud"}}`))
	if err == nil || !strings.Contains(err.Error(), "downloads.policy") || !strings.Contains(err.Error(), "log.level") {
		t.Fatalf("got %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":1}}}`))
	f.Add([]byte(`{"lease":{"defaultTtlMs":-1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Parse accepted an invalid config: %v", verr)
			}
		}
	})
}

func TestGatewayModeRules(t *testing.T) {
	c, err := Parse([]byte(`{"mode":"gateway","capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.IgnoredInGateway(); len(got) != 1 || got[0] != "capacity" {
		t.Fatalf("ignored keys %v", got)
	}
	if _, err := Parse([]byte(`{"mode":"gateway","http":{"enabled":false}}`)); err == nil {
		t.Fatal("a gateway with http disabled was accepted")
	}
	if _, err := Parse([]byte(`{"gateway":{"url":"https://gw","token":"t"}}`)); err == nil {
		t.Fatal("an https gateway url was accepted")
	}
	if _, err := Parse([]byte(`{"gateway":{"url":"ws://gw:7420"}}`)); err == nil {
		t.Fatal("a url without a token was accepted")
	}
	if _, err := Parse([]byte(`{"gateway":{"url":"wss://gw","token":"t","label":"mac-a"}}`)); err != nil {
		t.Fatal(err)
	}
}

func TestRequestRetentionDefaultAndBounds(t *testing.T) {
	if got := Default().Requests.RetentionMs; got != 24*3_600_000 {
		t.Fatalf("default requests.retentionMs %d", got)
	}
	for _, bad := range []string{`0`, `59999`, `-1`, `7776000001`} {
		if _, err := Parse([]byte(`{"requests":{"retentionMs":` + bad + `}}`)); err == nil || !strings.Contains(err.Error(), "requests.retentionMs") {
			t.Errorf("retentionMs %s: %v", bad, err)
		}
	}
	c, err := Parse([]byte(`{"requests":{"retentionMs":3600000}}`))
	if err != nil || c.Requests.RetentionMs != 3_600_000 {
		t.Fatalf("%+v %v", c.Requests, err)
	}
}

func TestMetricsListenMustBeLoopbackAndRetentionBounded(t *testing.T) {
	c := Default()
	if c.Metrics.Listen != "" || c.Events.Retention.Count != 10000 || c.Events.Retention.MaxAgeMs != 7*24*3_600_000 {
		t.Fatalf("defaults: metrics %+v events %+v", c.Metrics, c.Events)
	}
	for _, ok := range []string{"127.0.0.1:9464", "[::1]:9464", "localhost:0"} {
		if _, err := Parse([]byte(`{"metrics":{"listen":"` + ok + `"}}`)); err != nil {
			t.Errorf("metrics.listen %s: %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:9464", "10.1.2.3:9464", ":9464", "127.0.0.1"} {
		if _, err := Parse([]byte(`{"metrics":{"listen":"` + bad + `"}}`)); err == nil || !strings.Contains(err.Error(), "metrics.listen") {
			t.Errorf("metrics.listen %s: %v; want a metrics.listen error", bad, err)
		}
	}
	for _, bad := range []string{`{"count":0}`, `{"maxAgeMs":1000}`} {
		if _, err := Parse([]byte(`{"events":{"retention":` + bad + `}}`)); err == nil || !strings.Contains(err.Error(), "events.retention") {
			t.Errorf("events.retention %s: %v", bad, err)
		}
	}
}

// Clone provisioning is on when the key is absent (ADR 0053), off only
// for an explicit false, and the clone object stays strict.
func TestIOSCloneDefaultsOnAndFalseTurnsItOff(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{`{}`, true},
		{`{"drivers":{"ios":{"clone":{}}}}`, true},
		{`{"drivers":{"ios":{"clone":{"enabled":true}}}}`, true},
		{`{"drivers":{"ios":{"clone":{"enabled":false}}}}`, false},
	} {
		c, err := Parse([]byte(tc.raw))
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		if got := c.Drivers.IOS.Clone.On(); got != tc.want {
			t.Errorf("%s: clone on = %v, want %v", tc.raw, got, tc.want)
		}
	}
	if _, err := Parse([]byte(`{"drivers":{"ios":{"clone":{"enable":false}}}}`)); err == nil {
		t.Fatal("a misspelt clone key was accepted")
	}
}

func TestGatewayURLsIsAListAndURLIsAListOfOne(t *testing.T) {
	c, err := Parse([]byte(`{"gateway":{"urls":["ws://gw-a:7420","wss://gw-b"],"token":"t"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.GatewayURLs(); len(got) != 2 || got[1] != "wss://gw-b" {
		t.Fatalf("urls %v", got)
	}
	if c, err = Parse([]byte(`{"gateway":{"url":"ws://gw-a:7420","token":"t"}}`)); err != nil || len(c.GatewayURLs()) != 1 {
		t.Fatalf("url as a list of one: %v %v", c.GatewayURLs(), err)
	}
	for body, want := range map[string]string{
		`{"gateway":{"url":"ws://a","urls":["ws://b"],"token":"t"}}`: "not both",
		`{"gateway":{"urls":["ws://a","http://b"],"token":"t"}}`:     "ws:// or wss://",
		`{"gateway":{"urls":["ws://a","ws://a"],"token":"t"}}`:       "twice",
		`{"gateway":{"urls":["ws://a"]}}`:                            "go together",
	} {
		if _, err := Parse([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", body, err, want)
		}
	}
}
