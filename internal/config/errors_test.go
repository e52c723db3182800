package config

import (
	"strings"
	"testing"
)

// A broken file is reported by key path and line and column, so the person
// editing it goes straight to the spot.
func TestDecodeErrorsNameThePlace(t *testing.T) {
	cases := []struct {
		name, file string
		want       []string
	}{
		{"syntax", "{\n  \"http\": {\n    \"listen\": \"127.0.0.1:7420\",\n  }\n}", []string{"line 4, column 3", "invalid character"}},
		{"type", "{\n  \"http\": {\n    \"enabled\": true,\n    \"listen\": 7420\n  }\n}", []string{"http.listen", "line 4, column 15", "string", "number"}},
		{"unknown", "{\n  \"lease\": {\"defaultTtlMs\": 1000},\n  \"http\": {\n      \"lisen\": \"x\"\n  }\n}", []string{"http.lisen", "line 4, column 7", "unknown key"}},
		{"unknown top", "{\"mode\": \"worker\", \"modes\": 1}", []string{"modes (line 1, column 20)"}},
		{"unknown in list", "{\"warmPool\": {\"targets\": [{\"platform\": \"ios\", \"count\": 1, \"modl\": \"x\"}]}}", []string{"warmPool.targets[0].modl"}},
		{"bad listen while disabled", `{"http": {"listen": "localhost"}}`, []string{"http.listen", "not host:port"}},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.file))
		if err == nil {
			t.Errorf("%s: parsed", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
}
