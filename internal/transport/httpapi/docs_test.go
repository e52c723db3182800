package httpapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

func readDoc(t *testing.T) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "..", "docs", "http-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every ```json block of docs/http-api.md is valid JSON, and a block marked
// <!-- sample: Type --> decodes strictly into that type.
func TestDocSamplesMatchTheirTypes(t *testing.T) {
	types := map[string]func() any{
		"ErrorBody":           func() any { return &ErrorBody{} },
		"Health":              func() any { return &Health{} },
		"HelloOut":            func() any { return &contract.HelloOut{} },
		"LeaseRequestIn":      func() any { return &contract.LeaseRequestIn{} },
		"Lease":               func() any { return &contract.Lease{} },
		"LeaseRequestReceipt": func() any { return &contract.LeaseRequestReceipt{} },
		"PendingRequest":      func() any { return &PendingRequest{} },
		"RenewReply":          func() any { return &RenewReply{} },
		"LeaseReleaseOut":     func() any { return &contract.LeaseReleaseOut{} },
		"DeviceExecIn":        func() any { return &contract.DeviceExecIn{} },
		"Event":               func() any { return &contract.Event{} },
		"TokenCreateOut":      func() any { return &contract.TokenCreateOut{} },
	}
	block := regexp.MustCompile("(?s)(<!-- sample: (\\w+) -->\\n)?```json\\n(.*?)```")
	doc := readDoc(t)
	matches := block.FindAllStringSubmatch(doc, -1)
	if len(matches) < 10 {
		t.Fatalf("only %d JSON samples found", len(matches))
	}
	for _, m := range matches {
		body := []byte(strings.TrimSpace(m[3]))
		if !json.Valid(body) {
			t.Errorf("invalid JSON sample: %s", body)
			continue
		}
		if m[2] == "" {
			continue
		}
		mk, ok := types[m[2]]
		if !ok {
			t.Errorf("sample type %s is not known to the test", m[2])
			continue
		}
		if err := contract.Decode(body, mk()); err != nil {
			t.Errorf("%s sample: %v\n%s", m[2], err, body)
		}
	}
}

// The status table of docs/http-api.md lists every code once, with the
// status the error table gives it.
func TestDocStatusTableMatchesTheErrorTable(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| (\\d{3}) \\| (`[A-Z_]+`(?:, `[A-Z_]+`)*) \\|$")
	code := regexp.MustCompile("`([A-Z_]+)`")
	seen := map[contract.Code]bool{}
	for _, m := range row.FindAllStringSubmatch(readDoc(t), -1) {
		status, _ := strconv.Atoi(m[1])
		for _, c := range code.FindAllStringSubmatch(m[2], -1) {
			cc := contract.Code(c[1])
			if _, known := contract.ErrorTable[cc]; !known {
				t.Errorf("the doc lists unknown code %s", cc)
			}
			if StatusFor(cc) != status {
				t.Errorf("the doc says %s is %d; the table says %d", cc, status, StatusFor(cc))
			}
			seen[cc] = true
		}
	}
	for c := range contract.ErrorTable {
		if !seen[c] {
			t.Errorf("the doc's status table misses %s", c)
		}
	}
}
