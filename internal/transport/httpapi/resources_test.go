package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/simlock/simlock/contract"
)

// The resource routes reach the daemon's handlers with the lease id from
// the path: the read answers (a driver without resource control reports
// every group unsupported), the writes are refused while tuning is off,
// and another agent's token cannot reach the lease.
func TestResourceRoutes(t *testing.T) {
	f := newFixture(t, 1)
	l := f.lease(f.agent)
	var res contract.ResourceResult
	if resp := f.call("GET", "/v1/leases/"+l.LeaseID+"/resources", f.agent, "", &res); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: status %d", resp.StatusCode)
	}
	if res.DeviceID != l.DeviceID || res.Resources["animations"].State != contract.ResourceUnsupported || res.Verification != contract.ResourceVerificationCurrentBoot {
		t.Fatalf("GET: %+v", res)
	}
	body := `{"resources":{"animations":"disabled"}}`
	if e, _ := f.refusal("PUT", "/v1/leases/"+l.LeaseID+"/resources", f.agent, body); e.Code != contract.CodeResourcesDisabled {
		t.Fatalf("PUT: %+v", e)
	}
	if e, _ := f.refusal("POST", "/v1/leases/"+l.LeaseID+"/resources/reconcile", f.agent, body); e.Code != contract.CodeResourcesDisabled {
		t.Fatalf("reconcile: %+v", e)
	}
	if e, _ := f.refusal("GET", "/v1/leases/"+l.LeaseID+"/resources", f.agent2, ""); e.Code != contract.CodeForbidden {
		t.Fatalf("another agent: %+v", e)
	}
}
