// Command oapigen leases a device through a client that oapi-codegen
// generated from the OpenAPI document a simlock daemon serves, and nothing
// else: it imports no simlock package. TestGeneratedClientLeasesADevice
// (test/e2e) generates the simlockapi package into a copy of this module,
// builds it and runs it against a real daemon.
//
// Usage: oapigen <base URL> <agent token>. It prints one JSON line with
// what it saw and exits non-zero on the first surprise.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/simlock/simlock/test/oapigen/simlockapi"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: oapigen <base URL> <token>")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "oapigen:", err)
		os.Exit(1)
	}
}

type report struct {
	LeaseID       string `json:"leaseId"`
	DeviceID      string `json:"deviceId"`
	Platform      string `json:"platform"`
	State         string `json:"state"`
	Released      bool   `json:"released"`
	AfterCode     string `json:"afterCode"`
	BadPlatform   string `json:"badPlatformCode"`
	PublicDocCode int    `json:"publicDocStatus"`
}

func run(base, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bearer := func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
	c, err := simlockapi.NewClientWithResponses(base, simlockapi.WithRequestEditorFn(bearer))
	if err != nil {
		return err
	}
	var rep report

	wait := "wait=30"
	// platform is optional since a request may name devices[] instead
	// (ADR 0043), so the generated body holds it by pointer.
	ios, iso := simlockapi.Ios, simlockapi.Platform("iso")
	requester := "oapigen"
	got, err := c.LeaseRequestWithResponse(ctx, &simlockapi.LeaseRequestParams{Prefer: &wait},
		simlockapi.LeaseRequestJSONRequestBody{Platform: &ios, RequesterId: &requester})
	if err != nil {
		return fmt.Errorf("lease request: %w", err)
	}
	if got.JSON201 == nil {
		return fmt.Errorf("lease request: status %d, body %s", got.StatusCode(), got.Body)
	}
	lease := got.JSON201
	rep.LeaseID, rep.DeviceID, rep.Platform = lease.LeaseId, lease.DeviceId, string(lease.Platform)
	if lease.Device != nil {
		rep.State = string(lease.Device.Runtime.Lifecycle)
	}

	read, err := c.LeaseGetWithResponse(ctx, lease.LeaseId)
	if err != nil || read.JSON200 == nil || read.JSON200.DeviceId != lease.DeviceId {
		return fmt.Errorf("lease get: %v, status %d, body %s", err, read.StatusCode(), read.Body)
	}

	rel, err := c.LeaseReleaseWithResponse(ctx, lease.LeaseId)
	if err != nil || rel.JSON200 == nil {
		return fmt.Errorf("lease release: %v, status %d", err, rel.StatusCode())
	}
	rep.Released = rel.JSON200.Released

	// Refusals decode into the typed error body.
	after, err := c.LeaseGetWithResponse(ctx, lease.LeaseId)
	if err != nil || after.JSON404 == nil {
		return fmt.Errorf("lease get after release: %v, status %d, body %s", err, after.StatusCode(), after.Body)
	}
	rep.AfterCode = string(after.JSON404.Error.Code)
	bad, err := c.LeaseRequestWithResponse(ctx, nil, simlockapi.LeaseRequestJSONRequestBody{Platform: &iso, RequesterId: &requester})
	if err != nil {
		return fmt.Errorf("bad platform: %w", err)
	}
	switch {
	case bad.JSON400 != nil:
		rep.BadPlatform = string(bad.JSON400.Error.Code)
	case bad.JSON422 != nil:
		rep.BadPlatform = string(bad.JSON422.Error.Code)
	default:
		return fmt.Errorf("bad platform: status %d, body %s", bad.StatusCode(), bad.Body)
	}

	// The document itself needs no token.
	anon, err := simlockapi.NewClientWithResponses(base)
	if err != nil {
		return err
	}
	doc, err := anon.OpenapiWithResponse(ctx)
	if err != nil {
		return fmt.Errorf("openapi: %w", err)
	}
	rep.PublicDocCode = doc.StatusCode()

	return json.NewEncoder(os.Stdout).Encode(rep)
}
