package cli

import "github.com/simlock/simlock/contract"

// commandClaimPolicies declares, for every runnable command, how it relates
// to host-global device claims (contract.ClaimPolicy). There is no default:
// TestEveryCommandDeclaresAClaimPolicy fails when a command is added without
// an entry, or an entry outlives its command. A command that only talks to
// the daemon inherits the rules of the operations it calls; its entry says
// what a person running it should expect.
func commandClaimPolicies() map[string]contract.ClaimPolicy {
	return map[string]contract.ClaimPolicy{
		// Command groups only print their help or refuse an unknown
		// subcommand.
		"simlock":           contract.ClaimNone,
		"simlock config":    contract.ClaimNone,
		"simlock daemon":    contract.ClaimNone,
		"simlock device":    contract.ClaimNone,
		"simlock simsdk":    contract.ClaimNone,
		"simlock resources": contract.ClaimNone,
		"simlock session":   contract.ClaimNone,
		"simlock token":     contract.ClaimNone,
		"simlock worker":    contract.ClaimNone,
		"simlock host":      contract.ClaimNone,
		"simlock slot":      contract.ClaimNone,

		"simlock capabilities":   contract.ClaimNone,
		"simlock catalog":        contract.ClaimNone,
		"simlock cleanup":        contract.ClaimTransientExclusive,
		"simlock config show":    contract.ClaimNone,
		"simlock console":        contract.ClaimNone,
		"simlock daemon logs":    contract.ClaimNone,
		"simlock daemon run":     contract.ClaimNone,
		"simlock daemon start":   contract.ClaimNone,
		"simlock daemon status":  contract.ClaimObserve,
		"simlock daemon stop":    contract.ClaimRelease,
		"simlock demo":           contract.ClaimAcquire,
		"simlock device release": contract.ClaimRelease,
		"simlock device status":  contract.ClaimObserve,
		// host repair mutates no device: it rebuilds the registry from what
		// the homes record, claiming only what a home already runs.
		"simlock host repair":  contract.ClaimNone,
		"simlock doctor":       contract.ClaimTransientExclusive,
		"simlock events":       contract.ClaimObserve,
		"simlock exec":         contract.ClaimRequireOwner,
		"simlock lease":        contract.ClaimAcquire,
		"simlock lease cancel": contract.ClaimNone,
		"simlock lease get":    contract.ClaimObserve,
		"simlock lease list":   contract.ClaimObserve,
		"simlock lease renew":  contract.ClaimRequireOwner,
		"simlock list":         contract.ClaimObserve,
		"simlock mcp":          contract.ClaimAcquire,
		"simlock nuke":         contract.ClaimRelease,
		"simlock release":      contract.ClaimRelease,
		"simlock run":          contract.ClaimAcquire,
		"simlock selftest":     contract.ClaimNone,
		// slot list reads the host registry; reset-scope moves a retired
		// scope's devices to the free pool, never touching a live one.
		"simlock slot list":        contract.ClaimObserve,
		"simlock slot reset-scope": contract.ClaimRelease,
		"simlock simctl":           contract.ClaimRequireOwner,
		// Resource calls act on the caller's own lease's device; the
		// catalogue is static.
		"simlock resources get":       contract.ClaimRequireOwner,
		"simlock resources set":       contract.ClaimRequireOwner,
		"simlock resources reconcile": contract.ClaimRequireOwner,
		"simlock resources groups":    contract.ClaimNone,
		"simlock adb":                 contract.ClaimRequireOwner,
		"simlock simsdk install":      contract.ClaimNone,
		"simlock simsdk ps":           contract.ClaimNone,
		"simlock simsdk reset":        contract.ClaimNone,
		"simlock status":              contract.ClaimObserve,
		// Sessions are leases: prepare acquires, release and abandon give
		// the device back; hold only heartbeats until it releases.
		"simlock session prepare": contract.ClaimAcquire,
		"simlock session status":  contract.ClaimObserve,
		"simlock session abandon": contract.ClaimRelease,
		"simlock session release": contract.ClaimRelease,
		"simlock session stats":   contract.ClaimNone,
		"simlock session info":    contract.ClaimObserve,
		"simlock session hold":    contract.ClaimRelease,
		"simlock token create":    contract.ClaimNone,
		"simlock token list":      contract.ClaimNone,
		"simlock token revoke":    contract.ClaimNone,
		"simlock version":         contract.ClaimNone,
		"simlock worker drain":    contract.ClaimNone,
		"simlock worker list":     contract.ClaimNone,
		"simlock worker remove":   contract.ClaimNone,
		"simlock worker undrain":  contract.ClaimNone,
	}
}
