package claims

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/simlock/simlock/test/harness"
)

// Reference §6 (remote device lease) and §11 (remote open): a lease taken
// through a gateway writes no claim on the gateway's host. The worker that
// runs the device claims it in its own host registry; the gateway's host
// registry is never even created.
func TestClaimsALeaseThroughAGatewayWritesNoClaimOnItsHost(t *testing.T) {
	t.Parallel()
	harness.Proves(t, "claims/6.4", "claims/11.3")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	gw := harness.NewWorld(t, fmt.Sprintf(`{"mode":"gateway","http":{"listen":%q}}`, addr))
	gw.MustRun("daemon", "start")
	var tok struct{ Token string }
	gw.JSON(&tok, "token", "create", "--role", "worker", "--name", "join", "--json")
	wk := harness.NewWorld(t, "")
	cfg := fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":1,"maxManaged":2}},
 "gateway":{"url":"ws://%s","token":%q,"label":"mac-1"}}`, addr, tok.Token)
	if err := os.WriteFile(filepath.Join(wk.Home, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	wk.MustRun("daemon", "start")
	harness.Eventually(t, "the worker to join", 30*time.Second, func() bool {
		var ws struct{ Workers []struct{ State string } }
		gw.JSON(&ws, "worker", "list", "--json")
		return len(ws.Workers) == 1 && ws.Workers[0].State == "connected"
	})

	var got lease
	gw.JSON(&got, "lease", "--platform", "ios", "--detach", "--requester", "remote")
	key := "ios:udid:" + got.Device.UDID
	harness.Eventually(t, "the worker's claim of the device", 20*time.Second, func() bool {
		c, ok := claimOf(wk, key)
		return ok && c.OwnerHome == wk.Home
	})
	if cs := claims(gw); len(cs) != 0 {
		t.Fatalf("the gateway's host lists claims: %+v", cs)
	}
	if exists(gw.HostDir, "host.db") {
		t.Fatalf("the gateway created a host registry in %s", gw.HostDir)
	}
}
