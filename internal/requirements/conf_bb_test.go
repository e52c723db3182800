package requirements_test

import (
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/requirements"
)

// simlock-architecture, device identity: an OS version outside a model's
// supported range "fails immediately with the range named in the error",
// on the session path too. A runtime that dropped the model bounds the
// range by the newest installed runtime that still runs it.
func TestOSOutOfRangeNamesTheTypesRange(t *testing.T) {
	cat := requirements.Catalog{IOS: requirements.IOSCatalog{
		DeviceTypes: []requirements.IOSDeviceType{{Name: "iPhone Xs", Identifier: "txs", MinOS: "12.0.0"}},
		Runtimes: []requirements.IOSRuntime{
			{Version: "17.5", Identifier: "r17", Available: true, SupportedTypes: []string{"txs"}},
			{Version: "18.0", Identifier: "r18", Available: true, SupportedTypes: []string{"txs"}},
			{Version: "26.3", Identifier: "r26", Available: true, SupportedTypes: []string{"other"}},
		},
	}}
	_, err := requirements.Resolve(config.Sessions{}, cat, req("ios", model("simlock-model", "iPhone Xs"), osOf("exact", "26.3")))
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodeOSOutOfRange {
		t.Fatalf("%v", err)
	}
	if !strings.Contains(ce.Message, "iOS 12.0 to 18.0") || !strings.Contains(ce.NextAction, "iOS 12.0 to 18.0") {
		t.Fatalf("message %q, next %q", ce.Message, ce.NextAction)
	}
	if ce.Details["min"] != "12.0" || ce.Details["max"] != "18.0" {
		t.Fatalf("details %v", ce.Details)
	}
}
