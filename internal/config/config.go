// Package config loads simlock's configuration: $SIMLOCK_HOME/config.json (or
// --config FILE), strict JSON where an unknown key is an error, with
// documented defaults for everything left out.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config is the whole configuration file.
type Config struct {
	Mode         string       `json:"mode"`
	Lease        Lease        `json:"lease"`
	Queue        Queue        `json:"queue"`
	Capacity     Capacity     `json:"capacity"`
	Downloads    Downloads    `json:"downloads"`
	Log          Log          `json:"log"`
	EventBuffer  EventBuffer  `json:"eventBuffer"`
	Drivers      Drivers      `json:"drivers"`
	WarmPool     WarmPool     `json:"warmPool"`
	Health       Health       `json:"health"`
	Cleanup      Cleanup      `json:"cleanup"`
	DiskPressure DiskPressure `json:"diskPressure"`
	Exec         Exec         `json:"exec"`
	Requests     Requests     `json:"requests"`
	HTTP         HTTP         `json:"http"`
	Gateway      Gateway      `json:"gateway"`
	Metrics      Metrics      `json:"metrics"`
	Events       Events       `json:"events"`
	Upload       Upload       `json:"upload"`
	Resources    Resources    `json:"resources"`
	Inventory    Inventory    `json:"inventory"`
	Slots        Slots        `json:"slots"`
	// Sessions configures the session broker; nil: no session-broker/v1.
	Sessions *Sessions `json:"sessions,omitempty"`

	// explicit records the top-level keys and the http.enabled flag the
	// file actually set, for gateway-mode checks.
	explicit map[string]bool
}

// Gateway configures both ends of the fleet uplink.
type Gateway struct {
	// URL (worker mode) is the gateway's base URL, ws:// or wss://; with
	// Token set the worker dials <url>/v1/uplink and joins the fleet.
	URL string `json:"url,omitempty"`
	// URLs (worker mode) lists the fleet's gateways, tried in turn; url is
	// a list of one, and setting both is an error (ADR 0103).
	URLs []string `json:"urls,omitempty"`
	// Token (worker mode) is a join token minted on the gateway with
	// `simlock token create --role worker`.
	Token string `json:"token,omitempty"`
	// Label (worker mode) is a display name; it need not be unique.
	Label string `json:"label,omitempty"`
	// Routing (gateway mode) picks the policy; v1 has "warm-then-free".
	Routing string `json:"routing,omitempty"`
	// DisconnectedRetentionMs (gateway mode) keeps a disconnected worker's
	// view after its last lease's deadline (default 24 h).
	DisconnectedRetentionMs int64 `json:"disconnectedRetentionMs,omitempty"`
	// ExecTimeoutMs (gateway mode) is the backstop for device.exec through
	// the gateway, longer than the worker's own exec.timeoutMs (default 11 min).
	ExecTimeoutMs int64 `json:"execTimeoutMs,omitempty"`
	// Store (gateway mode) picks where the gateway keeps the requests it
	// accepted and its drained set: the home's SQLite file by default,
	// PostgreSQL when Store.Postgres.DSN is set (ADR 0101).
	Store GatewayStore `json:"store,omitzero"`
}

// GatewayStore is gateway.store.
type GatewayStore struct {
	Postgres GatewayPostgres `json:"postgres,omitzero"`
}

// GatewayPostgres is gateway.store.postgres: a pgx connection string and
// the most connections one gateway opens (0: pgx's default).
type GatewayPostgres struct {
	DSN      string `json:"dsn,omitempty"`
	PoolSize int    `json:"poolSize,omitempty"`
}

// GatewayURLs is the list of gateways a worker dials: gateway.urls, or
// gateway.url as a list of one.
func (c Config) GatewayURLs() []string {
	if c.Gateway.URL != "" {
		return []string{c.Gateway.URL}
	}
	return c.Gateway.URLs
}

// HTTP is the optional network frontend (docs/http-api.md).
type HTTP struct {
	// Enabled starts the HTTP API; off by default.
	Enabled bool `json:"enabled"`
	// Listen is host:port, loopback by default: simlock terminates no TLS,
	// so anything wider belongs behind the operator's own proxy.
	Listen string `json:"listen,omitempty"`
}

// Metrics configures the Prometheus endpoint (docs/user-guide.md, metrics).
// /metrics is always served on the HTTP API, behind a token.
type Metrics struct {
	// Listen, when set, also serves GET /metrics without a token on its
	// own listener, which must be a loopback address (default "": off).
	Listen string `json:"listen,omitempty"`
}

// Events configures the durable events journal (docs/events.md).
type Events struct {
	Retention EventsRetention `json:"retention"`
}

// EventsRetention bounds the journal; older facts are pruned in the
// background.
type EventsRetention struct {
	// Count keeps at most this many events (default 10000).
	Count int `json:"count"`
	// MaxAgeMs drops events older than this (default 7 days).
	MaxAgeMs int64 `json:"maxAgeMs"`
}

// Requests configures lease request receipts (docs/user-guide.md, durable requests).
type Requests struct {
	// RetentionMs keeps a settled request's receipt, and so its idempotency
	// key's answer, this long (default 24 h; at least a minute, at most 90 days).
	RetentionMs int64 `json:"retentionMs"`
	// MaxReceipts bounds the receipts kept at once, whatever their age
	// (default 2000): the oldest settled ones go first.
	MaxReceipts int `json:"maxReceipts"`
}

// Bounds of requests.retentionMs.
const (
	MinRequestRetentionMs = 60_000
	MaxRequestRetentionMs = 90 * 24 * 3_600_000
	MinRequestReceipts    = 100
	MaxRequestReceipts    = 1_000_000
)

type Exec struct {
	// TimeoutMs kills a device.exec command that runs longer (default 10 minutes).
	TimeoutMs int64 `json:"timeoutMs"`
}

type WarmPool struct {
	// Targets keep that many ready devices of a spec, provisioned when no
	// request is waiting.
	Targets    []WarmTarget `json:"targets,omitempty"`
	Quarantine Quarantine   `json:"quarantine"`
	// Demand makes the targets follow recorded demand (ADR 0042).
	Demand WarmDemand `json:"demand"`
}

// WarmDemand configures the demand-aware warm pool.
type WarmDemand struct {
	// Enabled keeps ready, per spec, the p90 of concurrent demand over the
	// window plus the requests waiting, less the leases held (default off).
	Enabled bool `json:"enabled"`
	// WindowMs is how far back demand is remembered (default 1 h).
	WindowMs int64 `json:"windowMs"`
	// SampleMs records the concurrency while nothing changes, so idleness
	// decays the p90 (default 1 min; at most windowMs).
	SampleMs int64 `json:"sampleMs"`
	// Spare keeps one ready device beyond the leased ones for every spec
	// leased within the window (default true; only with enabled).
	Spare bool `json:"spare"`
}

type WarmTarget struct {
	Platform  string `json:"platform"`
	Model     string `json:"model,omitempty"`
	OSVersion string `json:"osVersion,omitempty"`
	Count     int    `json:"count"`
}

type Quarantine struct {
	Retries    int     `json:"retries"`
	BackoffMs  int64   `json:"backoffMs"`
	Multiplier float64 `json:"multiplier"`
	CapMs      int64   `json:"capMs"`
}

type Health struct {
	IntervalMs          int64 `json:"intervalMs"`
	StableObservations  int   `json:"stableObservations"`
	MaxRecoveryAttempts int   `json:"maxRecoveryAttempts"`
}

type Cleanup struct {
	IntervalMs     int64 `json:"intervalMs"`
	IdleShutdownMs int64 `json:"idleShutdownMs"`
	IdleDestroyMs  int64 `json:"idleDestroyMs"`
}

type DiskPressure struct {
	FreeBytesThreshold uint64 `json:"freeBytesThreshold"`
}

// Queue bounds the demand one caller can place.
type Queue struct {
	// MaxPerPrincipal caps the lease requests one owner may have waiting
	// or being prepared at once; the next is QUEUE_LIMIT_REACHED
	// (retryable). Default 32.
	MaxPerPrincipal int `json:"maxPerPrincipal"`
	// MaxGroupSize caps the devices one multi-device lease request may
	// ask for (default 4).
	MaxGroupSize int `json:"maxGroupSize"`
	// GroupBypass is how many single requests queued behind a waiting
	// multi-device request may be served before it on its platforms;
	// then capacity is held for the group until it is granted (default 8).
	GroupBypass int `json:"groupBypass"`
}

type Lease struct {
	// DefaultTTLMs is the width of a lease whose request names none.
	DefaultTTLMs int64 `json:"defaultTtlMs"`
	// MaxTTLMs caps any requested width; asking for more is BAD_REQUEST.
	MaxTTLMs int64 `json:"maxTtlMs"`
}

type Capacity struct {
	// Strategy is "resource" (derive limits from CPU and RAM) or "fixed".
	Strategy string `json:"strategy"`
	Fixed    Fixed  `json:"fixed"`
	// Host caps running devices on the whole machine, across every simlock
	// home and counting devices booted outside simlock.
	Host HostCapacity `json:"host"`
}

// HostCapacity is the machine-wide running-device limit, shared through the
// host registry by every daemon of the OS user.
type HostCapacity struct {
	// MaxRunning caps running devices on the host; 0 means this daemon's
	// own running limit, so two daemons together never boot more than one
	// alone would.
	MaxRunning int `json:"maxRunning,omitempty"`
	// Platforms caps one platform's running devices on the host.
	Platforms map[string]HostPlatform `json:"platforms,omitempty"`
	// PollIntervalMs is how often the daemon checks the host registry for
	// other daemons' changes (default 1000).
	PollIntervalMs int64 `json:"pollIntervalMs,omitempty"`
	// OrphanGraceMs is how long a dead owner whose home still exists keeps
	// a running device before another home's watcher reclaims it: its
	// home may be restarting (default 120000, ADR 0059). A deleted home's
	// devices and a stopped device's claim are reclaimed without it.
	OrphanGraceMs int64 `json:"orphanGraceMs,omitempty"`
}

// DefaultOrphanGrace is capacity.host.orphanGraceMs when unset.
const DefaultOrphanGrace = 2 * time.Minute

// OrphanGrace is the configured orphan grace window, or its default.
func (h HostCapacity) OrphanGrace() time.Duration {
	if h.OrphanGraceMs <= 0 {
		return DefaultOrphanGrace
	}
	return time.Duration(h.OrphanGraceMs) * time.Millisecond
}

type HostPlatform struct {
	MaxRunning int `json:"maxRunning,omitempty"`
}

type Fixed struct {
	MaxRunning int                      `json:"maxRunning"`
	MaxManaged int                      `json:"maxManaged"`
	Platforms  map[string]PlatformFixed `json:"platforms,omitempty"`
}

type PlatformFixed struct {
	MaxRunning int `json:"maxRunning,omitempty"`
	MaxManaged int `json:"maxManaged,omitempty"`
}

type Downloads struct {
	// Policy is "never", "on-request" or "always".
	Policy string `json:"policy"`
	// AcceptLicenses lets the Android driver accept an SDK licence
	// sdkmanager asks about during an install; off, an unaccepted licence
	// is LICENSE_NOT_ACCEPTED with the command to run.
	AcceptLicenses bool `json:"acceptLicenses,omitempty"`
}

// Upload bounds device.upload (docs/user-guide.md, uploads).
type Upload struct {
	// MaxBytes caps one uploaded file (default 2 GiB).
	MaxBytes int64 `json:"maxBytes"`
}

// Resources configures resource-group tuning (docs/user-guide.md, resources).
type Resources struct {
	// Enabled allows resources.set and resources.reconcile on every lease;
	// off, only a lease requested with resources may use them.
	Enabled bool `json:"enabled,omitempty"`
}

// Inventory bounds how long inventory reads wait for enrichment before
// answering with what is known (docs/user-guide.md, inventory budgets).
type Inventory struct {
	// ListBudgetMs bounds a device list read (default 2000).
	ListBudgetMs int64 `json:"listBudgetMs"`
	// BootedBudgetMs bounds the booted-devices view (default 8000).
	BootedBudgetMs int64 `json:"bootedBudgetMs"`
	// CatalogBudgetMs bounds a catalog read (default 9000).
	CatalogBudgetMs int64 `json:"catalogBudgetMs"`
	// BackgroundCapMs bounds the shared fetch that continues after a
	// budget expired (default 30000).
	BackgroundCapMs int64 `json:"backgroundCapMs"`
}

type Log struct {
	Level       string `json:"level"`
	RotateBytes int64  `json:"rotateBytes"`
}

type EventBuffer struct {
	Size int `json:"size"`
}

type Drivers struct {
	IOS     IOSDriver    `json:"ios"`
	Android DriverConfig `json:"android"`
}

// IOSDriver adds the iOS-only driver settings.
type IOSDriver struct {
	DriverConfig
	// DeviceSet is "owned" (simlock's private simctl set under the root,
	// the default) or "default" (the user's default CoreSimulator set, so
	// xcodebuild, Simulator.app and test tools see the devices).
	DeviceSet string `json:"deviceSet,omitempty"`
	// Slim applies a resource profile to every iOS device the pool creates.
	Slim Slim `json:"slim"`
	// Clone provisions by cloning a golden device (ADR 0041).
	Clone IOSClone `json:"clone"`
}

// IOSClone is clone provisioning from golden devices.
type IOSClone struct {
	// Enabled is a pointer so that an absent key means on (ADR 0053) and
	// only an explicit false turns clone provisioning off.
	Enabled *bool `json:"enabled,omitempty"`
}

// On reports whether clone provisioning is on: by default it is.
func (c IOSClone) On() bool { return c.Enabled == nil || *c.Enabled }

// Slim is the opt-in density mode for iOS simulators.
type Slim struct {
	Enabled bool `json:"enabled,omitempty"`
	// Groups are the resource groups disabled on each device (default: the
	// driver's slim set).
	Groups []string `json:"groups,omitempty"`
}

// Device-set modes of drivers.ios.deviceSet.
const (
	DeviceSetOwned   = "owned"
	DeviceSetDefault = "default"
)

type DriverConfig struct {
	// Enabled turns the driver off when false (default on).
	Enabled *bool `json:"enabled,omitempty"`
	// Root is the directory the driver owns; default $SIMLOCK_HOME/devices/<platform>.
	Root string `json:"root,omitempty"`
}

// On reports whether the driver is enabled.
func (d DriverConfig) On() bool { return d.Enabled == nil || *d.Enabled }

// Default returns the configuration used when the file is absent.
func Default() Config {
	return Config{
		Mode:        "worker",
		Lease:       Lease{DefaultTTLMs: 30 * 60 * 1000, MaxTTLMs: 24 * 60 * 60 * 1000},
		Queue:       Queue{MaxPerPrincipal: 32, MaxGroupSize: 4, GroupBypass: 8},
		Capacity:    Capacity{Strategy: "resource", Fixed: Fixed{MaxRunning: 2, MaxManaged: 6}},
		Downloads:   Downloads{Policy: "on-request"},
		Log:         Log{Level: "info", RotateBytes: 10 << 20},
		EventBuffer: EventBuffer{Size: 1000},
		WarmPool: WarmPool{Quarantine: Quarantine{Retries: 3, BackoffMs: 30_000, Multiplier: 2, CapMs: 600_000},
			Demand: WarmDemand{WindowMs: 3_600_000, SampleMs: 60_000, Spare: true}},
		Health:       Health{IntervalMs: 5_000, StableObservations: 2, MaxRecoveryAttempts: 3},
		Cleanup:      Cleanup{IntervalMs: 60_000, IdleShutdownMs: 30 * 60_000, IdleDestroyMs: 24 * 3_600_000},
		DiskPressure: DiskPressure{FreeBytesThreshold: 10 << 30},
		Exec:         Exec{TimeoutMs: 10 * 60_000},
		Requests:     Requests{RetentionMs: 24 * 3_600_000, MaxReceipts: 2000},
		HTTP:         HTTP{Listen: "127.0.0.1:7420"},
		Events:       Events{Retention: EventsRetention{Count: 10_000, MaxAgeMs: 7 * 24 * 3_600_000}},
		Upload:       Upload{MaxBytes: 2 << 30},
		Inventory:    Inventory{ListBudgetMs: 2_000, BootedBudgetMs: 8_000, CatalogBudgetMs: 9_000, BackgroundCapMs: 30_000},
		Slots:        defaultSlots(),
	}
}

// Parse decodes data over the defaults, strictly, and validates the result.
func Parse(data []byte) (Config, error) {
	c := Default()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("config: %w", decodeError(data, err))
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(data, &raw) == nil {
		c.explicit = map[string]bool{}
		for k := range raw {
			c.explicit[k] = true
		}
		var h struct {
			Enabled *bool `json:"enabled"`
		}
		if json.Unmarshal(raw["http"], &h) == nil && h.Enabled != nil && !*h.Enabled {
			c.explicit["http.enabled=false"] = true
		}
		markSessionKeys(c.explicit, raw["sessions"])
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, errors.New("config: trailing data after the JSON object")
	}
	return c, c.Validate()
}

// Load reads path; a missing file yields the defaults.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		c := Default()
		return c, nil
	}
	if err != nil {
		return Config{}, err
	}
	c, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Validate checks values the JSON types cannot.
func (c Config) Validate() error {
	var errs []error
	switch c.Mode {
	case "worker":
		if c.Gateway.URL != "" && len(c.Gateway.URLs) > 0 {
			errs = append(errs, errors.New("gateway: set url (one gateway) or urls (several), not both"))
		}
		if (len(c.GatewayURLs()) == 0) != (c.Gateway.Token == "") {
			errs = append(errs, errors.New("gateway: url (or urls) and token go together (both to join a fleet, neither to stay alone)"))
		}
		seen := map[string]bool{}
		for _, raw := range c.GatewayURLs() {
			if u, err := url.Parse(raw); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
				errs = append(errs, fmt.Errorf("gateway.url: %q must be a ws:// or wss:// URL", raw))
			}
			if seen[raw] {
				errs = append(errs, fmt.Errorf("gateway.urls: %q is listed twice", raw))
			}
			seen[raw] = true
		}
	case "gateway":
		// A gateway is reached over HTTP and its uplinks upgrade from it.
		if c.explicit["http.enabled=false"] {
			errs = append(errs, errors.New("http.enabled: a gateway always listens on HTTP; remove http.enabled=false"))
		}
		if r := c.Gateway.Routing; r != "" && r != "warm-then-free" {
			errs = append(errs, fmt.Errorf("gateway.routing: %q is not warm-then-free", r))
		}
	default:
		errs = append(errs, fmt.Errorf("mode: %q is not worker or gateway", c.Mode))
	}
	if c.Lease.DefaultTTLMs <= 0 || c.Lease.MaxTTLMs <= 0 {
		errs = append(errs, errors.New("lease: defaultTtlMs and maxTtlMs must be positive"))
	}
	if c.Lease.DefaultTTLMs > c.Lease.MaxTTLMs {
		errs = append(errs, errors.New("lease: defaultTtlMs exceeds maxTtlMs"))
	}
	switch c.Capacity.Strategy {
	case "resource", "fixed":
	default:
		errs = append(errs, fmt.Errorf("capacity.strategy: %q is not resource or fixed", c.Capacity.Strategy))
	}
	if h := c.Capacity.Host; h.MaxRunning < 0 || h.PollIntervalMs < 0 || h.OrphanGraceMs < 0 {
		errs = append(errs, errors.New("capacity.host: maxRunning, pollIntervalMs and orphanGraceMs must not be negative"))
	}
	for p, hp := range c.Capacity.Host.Platforms {
		if hp.MaxRunning < 0 {
			errs = append(errs, fmt.Errorf("capacity.host.platforms.%s.maxRunning must not be negative", p))
		}
	}
	if c.Capacity.Strategy == "fixed" && (c.Capacity.Fixed.MaxRunning <= 0 || c.Capacity.Fixed.MaxManaged < c.Capacity.Fixed.MaxRunning) {
		errs = append(errs, errors.New("capacity.fixed: maxRunning must be positive and maxManaged at least maxRunning"))
	}
	switch c.Downloads.Policy {
	case "never", "on-request", "always":
	default:
		errs = append(errs, fmt.Errorf("downloads.policy: %q is not never, on-request or always", c.Downloads.Policy))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level: %q is not debug, info, warn or error", c.Log.Level))
	}
	if c.EventBuffer.Size <= 0 {
		errs = append(errs, errors.New("eventBuffer.size must be positive"))
	}
	for i, t := range c.WarmPool.Targets {
		if t.Platform == "" || t.Count <= 0 {
			errs = append(errs, fmt.Errorf("warmPool.targets[%d]: platform and a positive count are required", i))
		}
	}
	if dm := c.WarmPool.Demand; dm.WindowMs < 1_000 || dm.SampleMs <= 0 || dm.SampleMs > dm.WindowMs {
		errs = append(errs, errors.New("warmPool.demand: windowMs must be at least 1000 and sampleMs positive and at most windowMs"))
	}
	q := c.WarmPool.Quarantine
	if q.Retries <= 0 || q.BackoffMs <= 0 || q.Multiplier < 1 || q.CapMs < q.BackoffMs {
		errs = append(errs, errors.New("warmPool.quarantine: retries and backoffMs must be positive, multiplier at least 1, capMs at least backoffMs"))
	}
	if c.Health.IntervalMs <= 0 || c.Health.StableObservations <= 0 || c.Health.MaxRecoveryAttempts <= 0 {
		errs = append(errs, errors.New("health: intervalMs, stableObservations and maxRecoveryAttempts must be positive"))
	}
	if c.HTTP.Enabled && c.HTTP.Listen == "" {
		errs = append(errs, errors.New("http.listen is required when http.enabled is true"))
	} else if c.HTTP.Listen != "" {
		// Checked even while disabled: enabling it later should not be
		// when a typo surfaces.
		if err := checkListen(c.HTTP.Listen); err != nil {
			errs = append(errs, fmt.Errorf("http.listen: %w", err))
		}
	}
	if c.Metrics.Listen != "" {
		if err := checkLoopback(c.Metrics.Listen); err != nil {
			errs = append(errs, fmt.Errorf("metrics.listen: %w", err))
		}
	}
	if c.Events.Retention.Count <= 0 || c.Events.Retention.MaxAgeMs < 60_000 {
		errs = append(errs, errors.New("events.retention: count must be positive and maxAgeMs at least 60000 (a minute)"))
	}
	if c.Queue.MaxPerPrincipal <= 0 {
		errs = append(errs, errors.New("queue.maxPerPrincipal must be positive"))
	}
	if c.Gateway.Store.Postgres.PoolSize < 0 {
		errs = append(errs, errors.New("gateway.store.postgres.poolSize must not be negative"))
	}
	if c.Queue.MaxGroupSize < 2 || c.Queue.MaxGroupSize > 16 {
		errs = append(errs, errors.New("queue.maxGroupSize must be between 2 and 16"))
	}
	if c.Queue.GroupBypass <= 0 {
		errs = append(errs, errors.New("queue.groupBypass must be positive"))
	}
	if c.Exec.TimeoutMs <= 0 {
		errs = append(errs, errors.New("exec.timeoutMs must be positive"))
	}
	if c.Requests.RetentionMs < MinRequestRetentionMs || c.Requests.RetentionMs > MaxRequestRetentionMs {
		errs = append(errs, fmt.Errorf("requests.retentionMs must be between %d (a minute) and %d (90 days)", MinRequestRetentionMs, MaxRequestRetentionMs))
	}
	if c.Requests.MaxReceipts < MinRequestReceipts || c.Requests.MaxReceipts > MaxRequestReceipts {
		errs = append(errs, fmt.Errorf("requests.maxReceipts must be between %d and %d", MinRequestReceipts, MaxRequestReceipts))
	}
	errs = append(errs, c.Slots.validate()...)
	if c.Cleanup.IntervalMs <= 0 || c.Cleanup.IdleShutdownMs <= 0 || c.Cleanup.IdleDestroyMs < c.Cleanup.IdleShutdownMs {
		errs = append(errs, errors.New("cleanup: intervalMs and idleShutdownMs must be positive and idleDestroyMs at least idleShutdownMs"))
	}
	switch c.Drivers.IOS.DeviceSet {
	case "", DeviceSetOwned, DeviceSetDefault:
	default:
		errs = append(errs, fmt.Errorf("drivers.ios.deviceSet: %q is not owned or default", c.Drivers.IOS.DeviceSet))
	}
	if c.Upload.MaxBytes <= 0 {
		errs = append(errs, errors.New("upload.maxBytes must be positive"))
	}
	if i := c.Inventory; i.ListBudgetMs <= 0 || i.BootedBudgetMs <= 0 || i.CatalogBudgetMs <= 0 || i.BackgroundCapMs <= 0 {
		errs = append(errs, errors.New("inventory: listBudgetMs, bootedBudgetMs, catalogBudgetMs and backgroundCapMs must be positive"))
	}
	errs = append(errs, c.validateSessions())
	return errors.Join(errs...)
}

// IOSDeviceSet is drivers.ios.deviceSet with its default applied.
func (c Config) IOSDeviceSet() string {
	if c.Drivers.IOS.DeviceSet == "" {
		return DeviceSetOwned
	}
	return c.Drivers.IOS.DeviceSet
}

// checkListen accepts host:port with a numeric port, so a typo is reported
// when the file is read rather than after the daemon has half started.
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from 0 to 65535", addr)
	}
	return nil
}

// checkLoopback accepts host:port whose host is a loopback address or
// localhost: an endpoint served without a token must not face the network.
func checkLoopback(addr string) error {
	if err := checkListen(addr); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address (127.0.0.1, [::1] or localhost); it is served without a token", addr)
	}
	return nil
}

// Paths are the files simlock keeps under its home directory.
type Paths struct {
	Home       string
	Config     string
	DB         string
	Socket     string
	AdminToken string
	Log        string
	Instance   string
	PID        string
}

// PathsFor lays out home.
func PathsFor(home string) Paths {
	return Paths{
		Home:       home,
		Config:     filepath.Join(home, "config.json"),
		DB:         filepath.Join(home, "simlock.db"),
		Socket:     filepath.Join(home, "simlock.sock"),
		AdminToken: filepath.Join(home, "admin.token"),
		Log:        filepath.Join(home, "daemon.log"),
		Instance:   filepath.Join(home, "instance.json"),
		PID:        filepath.Join(home, "daemon.pid"),
	}
}

// Home resolves $SIMLOCK_HOME, defaulting to ~/.simlock.
func Home(getenv func(string) string) string {
	if h := getenv("SIMLOCK_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".simlock")
	}
	return ".simlock"
}

// HostDir resolves $SIMLOCK_HOST_DIR, the host registry's directory shared
// by every simlock home of the OS user, defaulting to ~/.simlock-host. It is
// not a config key: `simlock device status` must find it with no home and
// no daemon.
func HostDir(getenv func(string) string) string {
	if h := getenv("SIMLOCK_HOST_DIR"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".simlock-host")
	}
	return ".simlock-host"
}

// DriverRoot is the root for platform, from config or the default.
func (c Config) DriverRoot(home, platform string) string {
	var d DriverConfig
	switch platform {
	case "ios":
		d = c.Drivers.IOS.DriverConfig
	case "android":
		d = c.Drivers.Android
	}
	if d.Root != "" {
		return d.Root
	}
	return filepath.Join(home, "devices", platform)
}

// gatewayKeys are the only top-level keys a gateway reads.
var gatewayKeys = map[string]bool{"mode": true, "http": true, "log": true, "lease": true, "eventBuffer": true, "gateway": true,
	"metrics": true, "events": true, "requests": true, "queue": true}

// IgnoredInGateway lists the keys the file set that a gateway does not read
// (they configure devices, which a gateway has none of), for a warning.
func (c Config) IgnoredInGateway() []string {
	var out []string
	for k := range c.explicit {
		if !gatewayKeys[k] && !strings.Contains(k, "=") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
