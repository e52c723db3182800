// Package claims is the conformance suite of device claims: the ownership
// reference (agent-device-device-ownership.txt) statement by statement,
// proven through the surface a user of claims has: `simlock device status`
// and `device release [--stale|--force]`, `lease --device`, `daemon stop`,
// and several homes on one host registry.
//
// statements.go is the registry: each statement of the reference, by its
// section, paraphrased, with the tests that prove it or the ADR that
// decided a deviation. The conformance tests of this package mark what they
// prove with harness.Proves; tests elsewhere (test/e2e, unit tests) are
// named in the statement's Tests. `go run ./internal/tools/conformance`
// writes docs/conformance.md from it.
package claims

import "github.com/simlock/simlock/test/conformance"

// Contract is the device-claims registry.
var Contract = conformance.Contract{
	Name:      "claims",
	Title:     "Device claims",
	Reference: "agent-device-device-ownership.txt",
	Surface:   "the CLI (`device status`, `device release --stale/--force`, `lease --device`, `daemon stop`) with several homes on one host registry",
	Sections: conformance.Headings("Summary", "Motivation", "Goals", "Non-goals", "Public commands",
		"Terminology and authority", "Claim record and shared primitives", "Ownership states",
		"Corrupt claim rules", "Command descriptor policy", "Lifecycle", "Apple runner interaction",
		"Android reconciliation", "Owner-daemon transport", "Error contract",
		"Stage 0: daemon stop and shutdown lease finalization", "Rollout", "Acceptance criteria",
		"Sequencing and follow-ups"),
	Unlisted: "Sections 1 to 3 (summary, motivation, goals) and 19 (sequencing) state intent and history; " +
		"each requirement they announce is listed under the section that specifies it.",
	Statements: statements,
}

// Test names, shared by several statements.
const (
	e2eTwoHomes       = "test/e2e.TestTwoHomesOnOneRootNeverShareADevice"
	e2eVocabulary     = "test/e2e.TestConfClaimsDeviceInUseAndDeviceStatusShareOneVocabulary"
	e2eHangingRelease = "test/e2e.TestConfClaimsAHangingTeardownReadsReleasingAndTheWaitIsHonoured"
	e2eStaleAfterKill = "test/e2e.TestStaleReleaseAfterTheOwnerWasKilled"
	e2eStaleVsLive    = "test/e2e.TestStaleRefusesALiveOwnerAndForceAsksItFirst"
	e2eCorrupt        = "test/e2e.TestCorruptClaimNeedsForce"
	e2eStopClean      = "test/e2e.TestDaemonStopCleanReportsWhatItCouldProve"
	e2eStaleEmulator  = "test/e2e.TestStaleReleaseStopsAnOrphanedEmulator"
	e2eCopiedRecovery = "test/e2e.TestRecoveryCommandWorksWhenCopied"
	e2eForcedStop     = "test/e2e.TestForcedStopNeverClaimsUnknownCleanup"
	e2eHungStop       = "test/e2e.TestStopAHungDaemonBuiltUnderAnotherName"
	e2eStaleScenario  = "test/e2e.TestScenarioOneStaleRecoveryLeavesOneHolder"
	e2eForceScenario  = "test/e2e.TestScenarioOneForceRecoveryLeavesOneHolder"
	e2eDeletedHome    = "test/e2e.TestDeletedHomesClaimIsReclaimedByTheWatcher"
	e2eRestartingHome = "test/e2e.TestARestartingHomeKeepsItsDeviceAndAStoppedOrphanIsCleared"
	e2eGraceShutdown  = "test/e2e.TestADeadOwnersRunningDeviceIsShutDownAfterTheGrace"

	unitClassify        = "internal/hostreg.TestClassify"
	unitIgnoresAge      = "internal/hostreg.TestClassifyIgnoresAge"
	unitInspectNoWrite  = "internal/hostreg.TestInspectWritesNothing"
	unitKeys            = "internal/hostreg.TestKeys"
	unitAtomic          = "internal/hostreg.TestClaimIsAtomicAcrossProcesses"
	unitOwnerOnly       = "internal/hostreg.TestOpenCreatesOwnerOnlyDirAndFile"
	unitConflict        = "internal/hostreg.TestClaimConflictCarriesTheErrorContract"
	unitCorruptForce    = "internal/hostreg.TestCorruptClaimOnlyForceClears"
	unitStaleProof      = "internal/hostreg.TestReleaseStaleNeedsProofInsideTheTransaction"
	unitOneReclaimer    = "internal/hostreg.TestBeginReclaimHasOneWinner"
	unitReclaimDecision = "internal/hostreg.TestReclaimDecision"
	unitDeadPorts       = "internal/hostreg.TestDeadOwnersPortsAreReclaimable"
	unitLifecycle       = "internal/daemon.TestClaimsFollowTheDeviceLifecycle"
	unitFailedTeardown  = "internal/daemon.TestAFailedTeardownKeepsTheClaim"
	unitWarmGrant       = "internal/daemon.TestAWarmGrantWritesNothingToTheHostRegistry"
	unitForeignRefusal  = "internal/daemon.TestAForeignClaimRefusesBeforeThePlatformWithDeviceInUse"
	unitReleaseFirst    = "internal/daemon.TestConfDeviceReleaseMarksReleasingFirstAndFinishesWithoutItsCaller"
	unitPolicies        = "internal/cli.TestEveryCommandDeclaresAClaimPolicy"
	unitOpHooks         = "internal/core.TestOpHooksSeeEveryOperationAndMayRefuse"
	unitGatewayImports  = "internal/arch.TestGatewayNeverSeesADriver"
)

// adrNoAgentDeviceParts is the ADR on what agent-device has and simlock
// does not (XCTest runners, helper packages and a test IME, provider
// allocations, a feature gate, remote lease projection).
const adrNoAgentDeviceParts = "0079"

var statements = []conformance.Statement{
	// 4. Non-goals: each is a limit simlock keeps.
	{ID: "claims/4.1", Says: "Device claims stay a record of their own, apart from leases (and remote or runner leases).",
		Note: "A claim outlives its lease: a warm device keeps a transient claim after the lease ends."},
	{ID: "claims/4.2", Says: "Two mutating owners never share one device at the same time.",
		Tests: []string{e2eTwoHomes, e2eStaleScenario, e2eForceScenario}},
	{ID: "claims/4.3", Says: "An owner proven alive is never reclaimed for merely looking idle.",
		Tests: []string{unitIgnoresAge, e2eStaleVsLive}},
	{ID: "claims/4.4", Says: "Deleting a claim record is not cleanup: the device is settled first, the claim cleared after.",
		Tests: []string{e2eStaleAfterKill, e2eGraceShutdown, unitLifecycle}},
	{ID: "claims/4.5", Says: "Session-bound commands add no host-global claim reads or writes.",
		Tests: []string{unitWarmGrant}},
	{ID: "claims/4.6", Says: "A claim record exposes no daemon token or other credential."},

	// 5. Public commands.
	{ID: "claims/5.1", Says: "`device status` lists every local claim without starting a daemon.",
		Tests: []string{e2eStaleAfterKill},
		Note:  "The remote-lease part of this row is claims/17.2."},
	{ID: "claims/5.2", Says: "`device status` narrowed by selectors shows the owner home, the liveness class and the exact command that recovers the device."},
	{ID: "claims/5.3", Says: "A plain `device release` goes through the owner's ordinary release and clears the claim last.",
		Tests: []string{e2eCopiedRecovery, unitReleaseFirst}},
	{ID: "claims/5.4", Says: "`device release --stale` succeeds only on positive proof that the owner is gone, and reconciles the device on the platform first.",
		Tests: []string{e2eStaleAfterKill, e2eStaleVsLive, e2eStaleEmulator}},
	{ID: "claims/5.5", Says: "`device release --force` asks the owning daemon first and only then falls back to owner-scoped cleanup.",
		Tests: []string{e2eStaleVsLive, e2eForceScenario}},
	{ID: "claims/5.6", Says: "`daemon stop` proves which daemon it stops, stops it gracefully, and escalates within a bound.",
		Tests: []string{e2eHungStop, e2eForcedStop}},
	{ID: "claims/5.7", Says: "`daemon stop --clean` also scrubs what the daemon kept (leases, running devices) and reports it.",
		Tests: []string{e2eStopClean}},
	{ID: "claims/5.8", Says: "Existing inventory commands keep working; status and release live under a singular `device` group."},

	// 6. Terminology and authority.
	{ID: "claims/6.1", Says: "A claim makes one owner, a lease or a one-off mutating command, the only holder of a local device across the whole host.",
		Tests: []string{e2eTwoHomes}},
	{ID: "claims/6.2", Says: "Claims live in one user-private directory shared by every daemon of the host.",
		Tests: []string{unitOwnerOnly, e2eTwoHomes}},
	{ID: "claims/6.3", Says: "A claim key comes from the device's canonical identity, never from a hardcoded platform list or a connection name.",
		Tests: []string{unitKeys}},
	{ID: "claims/6.4", Says: "A remote target writes no local claim; the remote side stays the authority.",
		Tests: []string{unitGatewayImports},
		Note:  "simlock's remote target is a gateway: the worker that runs the device claims it on its own host."},
	{ID: "claims/6.5", Says: "Runner or process leases are a separate, lower mechanism that may outlive a claim.", ADR: adrNoAgentDeviceParts,
		Note: "simlock runs no XCTest runners; the one thing kept after a lease is a warm device, and it keeps its claim (ADR 0022)."},

	// 7. Claim record and shared primitives.
	{ID: "claims/7.1", Says: "An owner is identified by its pid together with its process start time, so a reused pid is not the owner.",
		Tests: []string{unitClassify}},
	{ID: "claims/7.2", Says: "The record names the owner's state directory (its home)."},
	{ID: "claims/7.3", Says: "Claim writes are atomic and serialized across processes.",
		Tests: []string{unitAtomic},
		Note:  "One SQLite transaction (BEGIN IMMEDIATE) per decision instead of tmp+rename files and a process lock (ADR 0020)."},
	{ID: "claims/7.4", Says: "A dead owner process and a vanished owner home are told apart.",
		Tests: []string{unitClassify, e2eStaleAfterKill, e2eDeletedHome}},
	{ID: "claims/7.5", Says: "Only not-found answers prove a home absent; permission or transient errors fail closed.",
		Tests: []string{unitClassify}},
	{ID: "claims/7.6", Says: "A transient claim says it is transient and names the command that took it."},
	{ID: "claims/7.7", Says: "A claim is rewritten when the device's life changes (taken, handed over, released), not per command.",
		Tests: []string{unitWarmGrant}},

	// 8. Ownership states.
	{ID: "claims/8.1", Says: "A free device is acquired normally.",
		Tests: []string{e2eTwoHomes}},
	{ID: "claims/8.2", Says: "A device claimed by a live owner is refused with DEVICE_IN_USE, not retryable.",
		Tests: []string{e2eVocabulary, e2eTwoHomes, e2eStaleVsLive}},
	{ID: "claims/8.3", Says: "A live owner's teardown in progress is refused, or retried after a bounded delay.",
		Tests: []string{e2eHangingRelease}},
	{ID: "claims/8.4", Says: "A teardown cut short by its owner's death is orphaned and can be reconciled.",
		Tests: []string{unitClassify}},
	{ID: "claims/8.5", Says: "An owner whose pid is dead or reused, or whose home is provably gone, is orphaned: open to automatic or `--stale` reconciliation.",
		Tests: []string{e2eStaleAfterKill, e2eDeletedHome}},
	{ID: "claims/8.6", Says: "A corrupt or contradictory record fails closed and needs `--force`.",
		Tests: []string{e2eCorrupt}},
	{ID: "claims/8.7", Says: "A failed cleanup keeps the ownership and reports the steps that failed.",
		Tests: []string{unitFailedTeardown}},
	{ID: "claims/8.8", Says: "An owner that is alive but idle, for however long, still keeps its device.",
		Tests: []string{unitIgnoresAge, e2eStaleVsLive}},

	// 9. Corrupt claim rules.
	{ID: "claims/9.1", Says: "Reading claims changes nothing: no record is renamed, set aside or freed by a look.",
		Tests: []string{unitInspectNoWrite}},
	{ID: "claims/9.2", Says: "Not finding an owner among known daemons does not prove the claim stale."},
	{ID: "claims/9.3", Says: "Asking the running daemons can show an owner is alive, but cannot show that no owner exists."},
	{ID: "claims/9.4", Says: "A corrupt record is set aside only by an authorized recovery, under the claim lock.",
		Tests: []string{unitCorruptForce, e2eCorrupt},
		Note:  "`--force` clears the record it inspected inside one registry transaction; nothing is quarantined."},
	{ID: "claims/9.5", Says: "`--stale` may set a corrupt record aside when what can still be read of it proves staleness.", ADR: "0021",
		Note: "Stricter: simlock never takes a corrupt record as proof; only `--force` clears it, and the watchers never reclaim it (ADR 0059)."},
	{ID: "claims/9.6", Says: "Without such proof a corrupt record needs an explicit `--force`.",
		Tests: []string{e2eCorrupt, unitCorruptForce}},
	{ID: "claims/9.7", Says: "Only lock files missing their owner metadata get a short grace-window cleanup; finalized records never do.", ADR: adrNoAgentDeviceParts,
		Note: "No lock files: every decision is one registry transaction, so there is no half-written lock to time out."},

	// 10. Command descriptor policy.
	{ID: "claims/10.1", Says: "Every command declares its claim policy, with no default, and a guard fails on a command without one.",
		Tests: []string{unitPolicies}},
	{ID: "claims/10.2", Says: "Observing commands may show ownership but never change it."},
	{ID: "claims/10.3", Says: "Commands bound to a lease trust the daemon's invariant and do no claim I/O per command.",
		Tests: []string{unitWarmGrant}},
	{ID: "claims/10.4", Says: "A sessionless device mutation takes a command-scoped claim, gives it back afterwards, and refuses a foreign claim.",
		Tests: []string{unitOpHooks, unitForeignRefusal}},
	{ID: "claims/10.5", Says: "Acquiring a lease claims the device before any platform preparation.",
		Tests: []string{e2eTwoHomes}},
	{ID: "claims/10.6", Says: "Releasing gives the claim back only once the teardown reached a safe end.",
		Tests: []string{unitLifecycle, unitFailedTeardown}},
	{ID: "claims/10.7", Says: "Every sessionless device-mutating path is covered, not only boot and shutdown.",
		Tests: []string{unitOpHooks, unitPolicies},
		Note:  "Every device mutation goes through one executor whose hooks take the claim (ADR 0020)."},

	// 11. Lifecycle.
	{ID: "claims/11.1", Says: "A local open resolves the canonical device, judges its claim, reclaims only a proven orphan, claims, and only then prepares the device.",
		Tests: []string{e2eTwoHomes, e2eDeletedHome, e2eRestartingHome}},
	{ID: "claims/11.2", Says: "A failure after the claim was taken cleans up what was made and gives the claim back.", ADR: "0022",
		Note: "A device never created leaves no claim; one that exists but failed to boot keeps its claim while quarantined (its state is unknown: fail closed) until a shutdown or destroy settles it."},
	{ID: "claims/11.3", Says: "A remote open uses the remote authority and writes no claim on the client's host.",
		Tests: []string{unitGatewayImports}},
	{ID: "claims/11.4", Says: "A release verifies its authority, marks the claim releasing, tears the device down, and clears the claim last.",
		Tests: []string{unitReleaseFirst, e2eHangingRelease, unitLifecycle}},
	{ID: "claims/11.5", Says: "A failed cleanup keeps release-failed (or claimed) with the steps that failed.",
		Tests: []string{unitFailedTeardown}},

	// 12. Apple runner interaction.
	{ID: "claims/12.1", Says: "A device's new holder may stop and restart an old runner left by an owner that gave the device up.", ADR: adrNoAgentDeviceParts,
		Note: "No XCTest runner exists to retain; a warm device keeps its claim, so nothing outlives ownership (ADR 0022)."},
	{ID: "claims/12.2", Says: "An old runner stays untouched while its owner still holds the device; contention then surfaces at open as DEVICE_IN_USE.",
		Tests: []string{e2eTwoHomes, e2eVocabulary},
		Note:  "With no runner, what stays protected is the device itself."},

	// 13. Android reconciliation.
	{ID: "claims/13.1", Says: "Staleness of a dead Android owner is re-proven under the claim lock before anything is reconciled.",
		Tests: []string{unitStaleProof, unitOneReclaimer}},
	{ID: "claims/13.2", Says: "The owner's helper package (or the bundled default) is force-stopped.", ADR: adrNoAgentDeviceParts,
		Note: "simlock installs no helper package on a device; it stops the emulator itself."},
	{ID: "claims/13.3", Says: "The device's previous input method is restored when the test IME is still active.", ADR: adrNoAgentDeviceParts,
		Note: "simlock installs no test IME."},
	{ID: "claims/13.4", Says: "Recording or profiling processes the owner started are stopped.", ADR: adrNoAgentDeviceParts,
		Note: "simlock starts no recorder or profiler of its own; stopping the emulator ends whatever ran on it."},
	{ID: "claims/13.5", Says: "Known ADB resources of the owner are reconciled.",
		Tests: []string{e2eStaleEmulator, unitDeadPorts},
		Note:  "The emulator is stopped through the owner root's private adb server; its ports are host leases (ADR 0025)."},
	{ID: "claims/13.6", Says: "The claim is cleared only after the reconciliation succeeded.",
		Tests: []string{e2eStaleEmulator, e2eGraceShutdown}},

	// 14. Owner-daemon transport.
	{ID: "claims/14.1", Says: "Reading ownership on this host needs only the registry file: `device status` works while no daemon runs.",
		Tests: []string{e2eStaleAfterKill}},
	{ID: "claims/14.2", Says: "A foreign live owner is released from its claim's home, through that home's protected daemon record, as an ordinary release; no token is copied into the claim.",
		Tests: []string{e2eCopiedRecovery, e2eStaleVsLive}},
	{ID: "claims/14.3", Says: "`--force` tries the graceful close first, then only termination scoped to the verified owner.",
		Tests: []string{e2eForceScenario, e2eStaleVsLive}},

	// 15. Error contract.
	{ID: "claims/15.1", Says: "A live-owner conflict is DEVICE_IN_USE with retryable false, and details naming the reason, the classification, the device key, the owner and the exact recovery command.",
		Tests: []string{e2eVocabulary, e2eTwoHomes, unitConflict}},
	{ID: "claims/15.2", Says: "Contention on an expiring remote lease may stay retryable and should show when it expires.", ADR: adrNoAgentDeviceParts,
		Note: "A device under another requester's lease answers NO_CAPACITY, retryable with retryAfterMs; the lease's expiresAt is not in the refusal."},

	// 16. Stage 0: daemon stop and shutdown lease finalization.
	{ID: "claims/16.1", Says: "`daemon stop` proves the daemon's pid by its start time, asks with SIGTERM, waits, and uses SIGKILL only once a bounded wait ran out.",
		Tests: []string{e2eHungStop, e2eForcedStop}},
	{ID: "claims/16.2", Says: "`--clean` also removes what the daemon retained, and the leases on it.",
		Tests: []string{e2eStopClean}},
	{ID: "claims/16.3", Says: "A graceful shutdown finalizes every active lease before it deletes session state.", ADR: adrNoAgentDeviceParts,
		Note: "simlock's leases are TTL leases kept on disk: a graceful stop leaves them with their deadlines and the next start adopts them; `--clean` releases them."},
	{ID: "claims/16.4", Says: "Pending provider releases get a bounded final drain, and unresolved ones are recorded while the daemon can still write.", ADR: adrNoAgentDeviceParts,
		Note: "simlock has no provider allocations; the home's host claims are what a stop enumerates."},
	{ID: "claims/16.5", Says: "After a kill, the stop result marks what the daemon left as unknown (pending null), never as cleaned.",
		Tests: []string{e2eForcedStop}},
	{ID: "claims/16.6", Says: "pending null means unknowable and pending [] means known to be empty.",
		Tests: []string{e2eStopClean, e2eForcedStop}},
	{ID: "claims/16.7", Says: "claimsReleased lists claims proven stale and cleaned; claimsOrphaned those proven stale with cleanup pending; a pid dying alone only orphans.",
		Tests: []string{e2eForcedStop, e2eStopClean}},

	// 17. Rollout.
	{ID: "claims/17.1", Says: "During the first stages a switch can turn enforcement off while claims keep being written and read.", ADR: adrNoAgentDeviceParts,
		Note: "Claims are enforced from the first release; there is no gate to turn off."},
	{ID: "claims/17.2", Says: "Remote leases are projected into ownership views with their provider, backend and expiry.", ADR: adrNoAgentDeviceParts,
		Note: "`device status` shows this host's claims only; a gateway's leases are read with `simlock --url ... status`."},

	// 18. Acceptance criteria.
	{ID: "claims/18.1", Says: "No two worktrees hold one local Android or Apple device at the same moment.",
		Tests: []string{e2eTwoHomes, e2eStaleScenario, e2eForceScenario, e2eStaleEmulator}},
	{ID: "claims/18.2", Says: "Contention is refused before any platform mutation.",
		Tests: []string{e2eTwoHomes, unitForeignRefusal}},
	{ID: "claims/18.3", Says: "Ownership can be read from a third worktree with no daemon of its own."},
	{ID: "claims/18.4", Says: "A conflict with a live owner is a structured, non-retryable DEVICE_IN_USE that gives the exact command to run next.",
		Tests: []string{e2eVocabulary, e2eCopiedRecovery}},
	{ID: "claims/18.5", Says: "No owner stays undiscoverable: the refusal and the ownership listing name the same owner.",
		Tests: []string{e2eVocabulary, e2eTwoHomes}},
	{ID: "claims/18.6", Says: "Dead owners are reclaimed automatically only on positive proof.",
		Tests: []string{e2eDeletedHome, e2eRestartingHome, unitReclaimDecision}},
	{ID: "claims/18.7", Says: "`--stale` leaves an owner proven alive alone.",
		Tests: []string{e2eStaleVsLive}},
	{ID: "claims/18.8", Says: "`--force` tries the owner daemon's graceful close first.",
		Tests: []string{e2eStaleVsLive}},
	{ID: "claims/18.9", Says: "Sessionless device mutations cannot touch a device another owner claims.",
		Tests: []string{unitForeignRefusal, unitOpHooks}},
	{ID: "claims/18.10", Says: "Lease-bound commands read and write no claim per call.",
		Tests: []string{unitWarmGrant}},
	{ID: "claims/18.11", Says: "A device freed by its owner can be taken even though that owner kept an Apple runner, which the new holder replaces.", ADR: adrNoAgentDeviceParts,
		Note: "No runners (claims/12.1)."},
	{ID: "claims/18.12", Says: "Recovering a dead Android owner ends its helper's instrumentation and puts back the input method before the claim goes.", ADR: adrNoAgentDeviceParts,
		Tests: []string{e2eStaleEmulator},
		Note:  "No helper or IME to restore (claims/13.2, 13.3); the emulator itself is stopped before the claim goes."},
	{ID: "claims/18.13", Says: "A corrupt final record keeps the device held, and looking at it changes nothing.",
		Tests: []string{e2eCorrupt, unitInspectNoWrite}},
	{ID: "claims/18.14", Says: "A dead owner's unfinished release can be recovered with `--stale`; a live owner's stays protected."},
	{ID: "claims/18.15", Says: "Cleanup failures keep ownership recoverable.",
		Tests: []string{unitFailedTeardown}},
	{ID: "claims/18.16", Says: "A graceful stop lists what it released and what is still pending.",
		Tests: []string{e2eStopClean},
		Note:  "What a stop lists is the home's host claims (claimsReleased, claimsOrphaned, pending); simlock has no provider allocations."},
	{ID: "claims/18.17", Says: "A forced stop reports pending as null and never implies a known cleanup.",
		Tests: []string{e2eForcedStop}},
	{ID: "claims/18.18", Says: "Results tell reconciled claims (claimsReleased) from cleanup-pending ones (claimsOrphaned).",
		Tests: []string{e2eStopClean, e2eForcedStop}},
}
