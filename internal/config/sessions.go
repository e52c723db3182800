package config

// Sessions is the session broker's operator configuration (the `sessions`
// section). Without the section the daemon serves no session-broker/v1 and
// session.prepare answers SESSIONS_NOT_CONFIGURED. Every key is strict:
// an unknown one fails the load like any other.
type Sessions struct {
	Limits SessionLimits `json:"limits"`
	// Defaults, per platform ("ios", "android"), say what an omitted or
	// coarse requirement resolves to.
	Defaults map[string]SessionDefaults `json:"defaults,omitempty"`
	// IOSClassifications classifies iOS device types (by name or
	// identifier) as phone, tablet or foldable.
	IOSClassifications map[string]string `json:"iosClassifications,omitempty"`
	// AndroidProfileArchetypes classifies AVD hardware profiles (by id) as
	// phone, tablet or foldable.
	AndroidProfileArchetypes map[string]string `json:"androidProfileArchetypes,omitempty"`
	Reset                    SessionReset      `json:"reset"`
	// ReceiptRetentionMs keeps terminal receipts this long (default 30 d).
	ReceiptRetentionMs int64 `json:"receiptRetentionMs,omitempty"`
	// ExportMaxAgeMs is how long an unacknowledged export pins its receipt
	// (default 180 d).
	ExportMaxAgeMs int64 `json:"exportMaxAgeMs,omitempty"`
	// ReleaseReplyBudgetMs bounds how long a release waits for cleanup
	// before answering cleanup_pending (default and maximum 30000).
	ReleaseReplyBudgetMs int64 `json:"releaseReplyBudgetMs,omitempty"`
	// HeartbeatTTLMs is how long a session lives after its keeper's last
	// heartbeat (default 10000).
	HeartbeatTTLMs int64 `json:"heartbeatTtlMs,omitempty"`
	// DefaultIdleTimeoutMs applies when a session config sets none
	// (default 3600000).
	DefaultIdleTimeoutMs int64 `json:"defaultIdleTimeoutMs,omitempty"`
}

// SessionLimits caps sessions' devices; a zero is "no cap" except where
// noted.
type SessionLimits struct {
	// TotalDeviceCap counts every session device: reserved, creating,
	// in use, resetting, idle, or not yet confirmed destroyed.
	TotalDeviceCap int `json:"totalDeviceCap,omitempty"`
	// SessionCap counts live sessions.
	SessionCap int `json:"sessionCap,omitempty"`
	// IdlePoolCap is how many reset devices may wait for the next session
	// (0: none, which zero pooling needs anyway).
	IdlePoolCap int `json:"idlePoolCap,omitempty"`
	// MaxConcurrentResetBoots bounds iOS erase-and-reuse resets running
	// at once (0: the boot limit of the host).
	MaxConcurrentResetBoots int `json:"maxConcurrentResetBoots,omitempty"`
}

// SessionDefaults is one platform's resolution policy.
type SessionDefaults struct {
	PolicyVersion string                  `json:"policyVersion"`
	Hardware      SessionHardwareDefaults `json:"hardware"`
	OS            SessionOSDefaults       `json:"os"`
}

// SessionHardwareDefaults maps archetypes to model types and model types
// to installed models (iOS), or archetypes to AVD profiles (Android).
type SessionHardwareDefaults struct {
	// Omitted is the archetype used when a requirement names no hardware.
	Omitted    string                  `json:"omitted,omitempty"`
	Archetypes []SessionArchetypeMap   `json:"archetypes,omitempty"`
	ModelTypes []SessionModelTypeMap   `json:"modelTypes,omitempty"`
	Profiles   []SessionAndroidProfile `json:"profiles,omitempty"`
}

// SessionArchetypeMap maps an archetype to a model type.
type SessionArchetypeMap struct {
	Archetype string           `json:"archetype"`
	ModelType SessionModelType `json:"modelType"`
}

// SessionModelType is a family and a variant (iphone/pro).
type SessionModelType struct {
	Family  string `json:"family"`
	Variant string `json:"variant,omitempty"`
}

// SessionModelTypeMap maps a model type to one installed model.
type SessionModelTypeMap struct {
	ModelType SessionModelType `json:"modelType"`
	Model     SessionModel     `json:"model"`
}

// SessionModel names a model in a namespace (product-model iPhone17,1).
type SessionModel struct {
	Namespace string `json:"namespace"`
	Value     string `json:"value"`
}

// SessionAndroidProfile maps an archetype to an AVD hardware profile.
type SessionAndroidProfile struct {
	Archetype string `json:"archetype"`
	ProfileID string `json:"profileId"`
	// MemoryMB, at least 2048 when set, constrains creation and reuse.
	MemoryMB int `json:"memoryMb,omitempty"`
}

// SessionOSDefaults selects the OS an omitted requirement gets.
type SessionOSDefaults struct {
	Selector         SessionOSSelector `json:"selector"`
	PreferredVersion string            `json:"preferredVersion,omitempty"`
}

// SessionOSSelector is exact {version}, atLeast {version} or latest.
type SessionOSSelector struct {
	Kind    string `json:"kind"`
	Version string `json:"version,omitempty"`
}

// SessionReset chooses what a session's release does to its device, per
// platform. The default is zero pooling: destroy.
type SessionReset struct {
	// IOS is destroy (default) or erase: stop, erase and boot the same
	// simulator, verify it, and keep it for the next session.
	IOS string `json:"ios,omitempty"`
	// Android is destroy (default), keep-booted (clean the running
	// emulator back to its baseline) or snapshot (restore its baseline
	// snapshot, -wipe-data when that fails).
	Android string `json:"android,omitempty"`
	// AndroidKeepBootedMaxUses retires a keep-booted device after this
	// many sessions (default 20).
	AndroidKeepBootedMaxUses int `json:"androidKeepBootedMaxUses,omitempty"`
	// AndroidKeepBootedFallback is destroy (default) or snapshot.
	AndroidKeepBootedFallback string `json:"androidKeepBootedFallback,omitempty"`
	// AndroidResetTimeoutMs bounds a whole Android reset (default 600000).
	AndroidResetTimeoutMs int64 `json:"androidResetTimeoutMs,omitempty"`
}
