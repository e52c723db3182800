// Package slots is the conformance suite of managed device slots: the
// managed-slots reference (automobile-managed-device-slots.txt) statement
// by statement, proven through the surface a runner of slots has: the
// slot proxy, `simlock mcp --slot-config` (or SIMLOCK_SLOT_CONFIG), its
// initialize answer, its resource and its tools, with `slot list` and
// `slot reset-scope` beside it.
//
// statements.go is the registry: each statement of the reference, by its
// section, paraphrased, with the tests that prove it or the ADR that
// decided a deviation. The conformance tests of this package mark what
// they prove with harness.Proves; the e2e tests (test/e2e/slots*_test.go,
// conf_c_slots_test.go) and unit tests that already prove a statement are
// named in its Tests. `go run ./internal/tools/conformance` writes
// docs/conformance.md from it.
package slots

import "github.com/simlock/simlock/test/conformance"

// Contract is the managed-slots registry.
var Contract = conformance.Contract{
	Name:      "slots",
	Title:     "Managed slots",
	Reference: "automobile-managed-device-slots.txt",
	Surface:   "the slot proxy (`simlock mcp --slot-config` or `SIMLOCK_SLOT_CONFIG`: its initialize answer, the `simlock://managed-slots` resource and its tools), with `slot list` and `slot reset-scope`",
	Sections: conformance.Headings("Managed device slots", "Status", "Concepts", "Launch configuration",
		"Worked launcher example", "Version negotiation", "Lifecycle", "Idle and liveness", "Spec matching",
		"Scope reset and abandonment", "Results and failure", "Enforcement", "Boot capacity", "Error codes",
		"End-to-end example"),
	Unlisted: "Section 2 (status) is the reference's history and its known gaps; each fixed gap is listed under the section that specifies it. " +
		"Product names follow simlock's: `simlock mcp --slot-config`, `SIMLOCK_SLOT_CONFIG`, `simlock/managedSlots`, `simlock://managed-slots`, " +
		"`simlock slot reset-scope`, `simlock-slot-` device names and UPPER_SNAKE codes.",
	Statements: statements,
}

// Test names, shared by several statements.
const (
	e2eSixSteps         = "test/e2e.TestManagedSlotsSixStepsThroughRealMCPProxies"
	e2eMalformed        = "test/e2e.TestManagedSlotMalformedSpecFailsFastAndCreatesNothing"
	e2eProxyRestart     = "test/e2e.TestManagedSlotProxyWaitsOutADaemonRestart"
	e2eOwnerExit        = "test/e2e.TestManagedSlotEndsWhenItsExecutionOwnerExits"
	e2eSigterm          = "test/e2e.TestManagedSlotProxyReleasesOnSIGTERM"
	e2eLifecycle        = "test/e2e.TestManagedSlotLifecycleOnTheSimulatedSDK"
	e2eTwoDaemons       = "test/e2e.TestASlotHeldThroughOneDaemonIsInUseThroughAnother"
	e2eKill9Replace     = "test/e2e.TestKill9MidReplacementConvergesToOneDevice"
	e2eRestartKeeps     = "test/e2e.TestASlotExecutionSurvivesADaemonRestart"
	e2eTransition       = "test/e2e.TestScopeTransitionWaitsForTheOldIncarnation"
	e2eFlood            = "test/e2e.TestSlotAcquireFloodHasOneWinnerAndForeignTokensChangeNothing"
	e2eReplaceListings  = "test/e2e.TestASlotReplaceListsTheDeviceSetTwice"
	e2eYieldPlain       = "test/e2e.TestIdleSlotDevicesYieldToAPlainLeaseAtCapacity"
	e2ePrincipalBound   = "test/e2e.TestOnePrincipalsSlotDevicesAreBounded"
	e2eReuseAtLimit     = "test/e2e.TestASlotReuseAtTheLimitIsRefusedAtOnce"
	e2eKill9Outage      = "test/e2e.TestAManagedExecutionOutlivesAKill9AndATwelveSecondOutage"
	e2eReuseAfterReboot = "test/e2e.TestASlotReuseAtTheLimitAfterARestartIsRefusedAtOnce"
	e2eIdleShutdown     = "test/e2e.TestTheIdleShutdownRuleStopsAnIdleSlotDevice"
	e2eSharedRoot       = "test/e2e.TestAShutDownSlotDeviceOfASharedRootStaysTheSlots"
	e2eConfReplacing    = "test/e2e.TestConfSlotsAnInterruptedReplaceListsReplacing"
	e2eConfAndroid36    = "test/e2e.TestConfSlotsAMalformedAndroidRuntimeIsSpecUnsupportedAtOnce"
	e2eConfScopeKey     = "test/e2e.TestConfSlotsAFailureAfterTheScopeResolvedNamesItsKey"
	e2eConfEndReason    = "test/e2e.TestConfSlotsTheProxyReportsTheDaemonsEndReason"
	e2eConfOtherHome    = "test/e2e.TestConfSlotsADeviceInAnotherHomeSendsTheRunnerThere"

	unitParseRefusals  = "contract.TestParseSlotLaunchConfigRefusals"
	unitParseExample   = "contract.TestParseSlotLaunchConfigAcceptsTheWorkedExample"
	unitParseBounds    = "contract.TestParseSlotLaunchConfigAcceptsBounds"
	unitScopeKey       = "contract.TestScopeKeyAndFingerprint"
	unitCLIConfigError = "internal/cli.TestMCPSlotConfigErrorExitsWithTheTypedCodeBeforeServing"
	unitConfigSource   = "internal/transport/mcp.TestReadSlotConfigFlagWinsOverEnvAndTellsInlineFromPath"
	unitDeadOwnerPid   = "internal/transport/mcp.TestLoadSlotConfigRefusesADeadExecutionOwnerPid"
	unitConfinement    = "internal/transport/mcp.TestSlotConfinementRefusesWithEachReason"
	unitIdleResource   = "internal/transport/mcp.TestSlotResourceAddsExecutionEndedAfterAnIdleRelease"
	unitFailedServes   = "internal/transport/mcp.TestSlotFailedAcquisitionServesZeroToolsAndRefusesEveryCall"
	unitStdinEOF       = "internal/transport/mcp.TestSlotAcquisitionAbortsOnStdinEOF"
	unitHoldAndStall   = "internal/transport/mcp.TestSlotExecutionHeartbeatsWaitsForAnAbsentDaemonAndReleasesAtOwnerLoss"
	unitDeadline       = "internal/transport/mcp.TestSlotPreparationDeadlineFailsTheAcquisitionAndStillServes"
	unitOwnerWatch     = "internal/transport/mcp.TestExecOwnerWatchSeesAnExplicitOwnerExit"
	unitReleaseBudget  = "internal/transport/mcp.TestSlotReleaseBudgetCoversTheDaemonsSettleWait"
	unitProxyScopeKey  = "internal/transport/mcp.TestConfSlotFailureAfterTheScopeResolvedNamesItsKey"
	unitForeignToken   = "internal/daemon.TestASlotExecutionRefusesAForeignOwnerToken"
	unitFlood          = "internal/daemon.TestASlotAcquireFloodHasOneWinner"
	unitReleaseSettles = "internal/daemon.TestASlotReleaseWakesWhenTheDeviceSettles"
	unitRehydratedIdle = "internal/daemon.TestARehydratedSlotExecutionKeepsItsConfiguredIdleWindow"
	unitIdleEnds       = "internal/slots.TestAnIdleSlotExecutionEndsForGood"
	unitAcquireRefuse  = "internal/daemon.TestSlotAcquireRefusals"
	unitWaitDeadline   = "internal/slots.TestASlotAcquisitionWaitsForAnotherOnlyUntilItsDeadline"
	unitFencing        = "internal/hostreg.TestSlotGenerationFencesStaleCommits"
	unitOwnerDaemon    = "internal/hostreg.TestSlotInUseThroughAnotherDaemonUntilItsOwnerDies"
	unitJournal        = "internal/hostreg.TestSlotJournalSurvivesACrashAndIsHandedToTheRetry"
	unitTransition     = "internal/hostreg.TestScopeTransitionWaitsThenFreesDevicesForAdoption"
	unitAbandoned      = "internal/hostreg.TestScopeAbandonedAfterAnHourAndRevived"
	unitForce          = "internal/hostreg.TestResetScopeForceRefusalsAndIdempotence"
	unitResetPending   = "internal/hostreg.TestResetScopeCleanupPendingAndJournalRefuse"
	unitOwnerIdle      = "internal/hostreg.TestSlotOwnerKeepsItsIdleWindow"
	unitStaysReplacing = "internal/hostreg.TestConfSlotAnInterruptedReplaceStaysReplacing"
	unitReconcile      = "internal/slots.TestReconcileCreateReuseRecreateReplaceAdopt"
	unitCapacityFirst  = "internal/slots.TestReplaceChecksCapacityBeforeDeleting"
	unitUninstalled    = "internal/slots.TestReplaceToAnUninstalledSpecChangesNothing"
	unitPartial        = "internal/slots.TestPartialInventoryNeverReplaces"
	unitFailedDelete   = "internal/slots.TestFailedDeletionKeepsTheOldAssignmentCleanupPending"
	unitInterrupted    = "internal/slots.TestInterruptedReplacementConvergesToOneDevice"
	unitOmitted        = "internal/slots.TestSpecMatchesTreatsOmittedFieldsAsUnconstrained"
	unitFreshListing   = "internal/slots.TestAProofOfAbsenceIsAFreshListing"
	unitReuseAtLimit   = "internal/slots.TestReuseOfAShutDownDeviceAtTheLimitIsRefusedAtOnce"
	unitSpecForm       = "internal/slots.TestConfSlotSpecFormRefusesAMalformedRuntime"
	unitAssignedOnly   = "internal/core.TestAnAssignedDeviceServesOnlyItsSlot"
	unitFreePool       = "internal/core.TestAFreePoolDeviceServesNoExecution"
)

// The ADRs these statements cite.
const (
	adrSlotRegistry  = "0049" // the host registry's slot tables, one host-wide generation
	adrSlotsYield    = "0062" // idle slot devices yield running room; the re-bind window
	adrOtherHome     = "0069" // a slot whose device lives in another home
	adrNotInSimlock  = "0083" // the reference's parts simlock does not have
	adrDrainAndCodes = "0084" // the drain's budgets and registry retries; codes simlock folds
)

var statements = []conformance.Statement{
	// 1. Managed device slots (the page's opening).
	{ID: "slots/1.1", Says: "A runner starts one proxy per execution and names the slot it is; simlock assigns, makes, reuses or replaces that slot's device, and the caller neither picks a device nor calls lifecycle tools.",
		Tests: []string{e2eSixSteps}},

	// 3. Concepts.
	{ID: "slots/3.1", Says: "A slot is a numeric index qualified by the host scope, the runner namespace and the runner incarnation: two runners that both use index 0 hold two different slots.",
		Tests: []string{e2eSixSteps, e2eLifecycle}},
	{ID: "slots/3.2", Says: "The scope key is the hex SHA-256 digest of the three scope parts.",
		Tests: []string{unitScopeKey}},
	{ID: "slots/3.3", Says: "The host keeps, per scoped slot, the device's stable id and the spec it was resolved against, and that record outlives the execution's proxy.",
		Tests: []string{e2eSixSteps, e2eLifecycle}},
	{ID: "slots/3.4", Says: "Ending an execution clears only its owner: the idle device stays assigned to its slot and is not handed back to the general pool.",
		Tests: []string{e2eLifecycle, unitAssignedOnly}},
	{ID: "slots/3.5", Says: "The assignment generation is a fencing counter that only grows and may skip: each binding commit, and each entry into replacing, settling or cleanup_pending, takes a new value, and a commit at a stale value is refused.",
		Tests: []string{unitFencing, e2eConfReplacing, unitStaysReplacing}},
	{ID: "slots/3.6", Says: "An unchanged ready binding, and a release that never enters settling, leave the generation where it was."},
	{ID: "slots/3.7", Says: "A new incarnation is a new scope whose slot starts from zero, so its first binding is generation 1.", ADR: adrSlotRegistry,
		Note: "simlock's generation is one host-wide counter (values never reused even across retired scopes), so a new scope's first binding takes the next host value; it still only grows within the slot."},
	{ID: "slots/3.8", Says: "The assignments live in one host-wide registry, not per daemon, so every daemon on the host sees the same ones.",
		Tests: []string{e2eTwoDaemons, unitOwnerDaemon}},
	{ID: "slots/3.9", Says: "There is no caller operation id: a retry of the same scope, slot and spec converges on what was committed, through the slot identity, the generation and the journal.",
		Tests: []string{e2eKill9Replace, unitInterrupted, unitJournal}},

	// 4. Launch configuration.
	{ID: "slots/4.1", Says: "The launcher hands the proxy its config by a flag (either spelling) or an environment variable; the flag wins, and a value opening with `{` is inline JSON, anything else a file path.",
		Tests: []string{unitConfigSource, unitCLIConfigError}},
	{ID: "slots/4.2", Says: "The config is parsed strictly, unknown keys refused, before any daemon or device work.",
		Tests: []string{unitParseRefusals, unitCLIConfigError}},
	{ID: "slots/4.3", Says: "contractVersion, the three scope parts (1 to 256 characters each), localSlotCapacity and requests are required; executionAttempt is optional and only correlates.",
		Tests: []string{unitParseRefusals, unitParseBounds}},
	{ID: "slots/4.4", Says: "Version 1 takes exactly one slot of capacity and one request; a duplicate slotIndex is invalid.",
		Tests: []string{unitParseRefusals, unitCLIConfigError}},
	{ID: "slots/4.5", Says: "idleTimeoutMs lies between 2 and 60 minutes; a value outside is refused, never clamped.",
		Tests: []string{unitParseRefusals, unitAcquireRefuse}},
	{ID: "slots/4.6", Says: "An executionOwnerPid must name a running process when the proxy starts, or the config is invalid.",
		Tests: []string{unitDeadOwnerPid}},
	{ID: "slots/4.7", Says: "The config cannot be combined with the options that bind the proxy to another session.", ADR: adrNotInSimlock,
		Tests: []string{unitCLIConfigError},
		Note:  "simlock has no `--initial-session-uuid` or `--no-proxy`; the one option that binds another session, `--session-config`, is refused beside it with MANAGED_SLOT_CONFIG_INVALID."},
	{ID: "slots/4.8", Says: "Only the launching process sets the config; nothing an agent calls can change the scope it names.",
		Tests: []string{unitConfinement},
		Note:  "A tool call naming another namespace, incarnation or host scope is refused (reasons scope and host)."},
	{ID: "slots/4.9", Says: "Each request names its slotIndex, role, platform and a strict per-platform spec (runtime, optional deviceType, ...) with no name and no other key; priorDeviceHint is optional and never trusted.",
		Tests: []string{unitParseRefusals}},
	{ID: "slots/4.10", Says: "A spec's displayCutout (and an Android configuration) shape the device made for it.", ADR: adrNotInSimlock,
		Note: "Accepted by the schema, but a device that must be made for a spec naming either is refused SPEC_UNSUPPORTED: nothing applies them yet."},

	// 5. Worked launcher example.
	{ID: "slots/5.1", Says: "The reference's own Android launch config is a valid config.",
		Tests: []string{unitParseExample}},

	// 6. Version negotiation.
	{ID: "slots/6.1", Says: "The daemon advertises the managed-slots/v1 capability.",
		Tests: []string{e2eLifecycle}},
	{ID: "slots/6.2", Says: "contractVersion is judged before any other field, so a newer contract's shape reports CONTRACT_UNSUPPORTED rather than a schema error.",
		Tests: []string{unitParseRefusals, unitCLIConfigError}},
	{ID: "slots/6.3", Says: "A build that does not serve slots refuses a supplied config with MANAGED_SLOTS_UNSUPPORTED rather than running unmanaged.", ADR: adrNotInSimlock,
		Note: "Every simlock build serves slots; the code is in the error table and never answered. A daemon that lacks managed-slots/v1 makes the proxy fail CONTRACT_UNSUPPORTED."},

	// 7. Lifecycle.
	{ID: "slots/7.1", Says: "The slot is acquired before the initialize answer, on the same stdio connection, under one preparationTimeoutMs deadline.",
		Tests: []string{e2eSixSteps, unitDeadline, unitWaitDeadline}},
	{ID: "slots/7.2", Says: "Stdin EOF or SIGTERM aborts an acquisition still in progress.",
		Tests: []string{unitStdinEOF},
		Note:  "The test drives stdin EOF; SIGTERM aborts through the same signal context and has no test of its own during an acquisition."},
	{ID: "slots/7.3", Says: "Each execution gets a fresh lease tagged with its slot; a later execution on the slot gets another, never an old one.",
		Tests: []string{e2eSixSteps, e2eLifecycle}},
	{ID: "slots/7.4", Says: "The proxy holds the execution by heartbeats, and only its owner's heartbeats keep it; a caller with another owner token can neither renew nor release it.",
		Tests: []string{e2eFlood, unitForeignToken, unitHoldAndStall}},
	{ID: "slots/7.5", Says: "Binding a connection to managed sessions it cannot prove it holds is refused with MANAGED_SLOT_REGISTRATION_REFUSED.", ADR: adrNotInSimlock,
		Note: "simlock has no session registration frame: every heartbeat and release carries the execution's owner token, and a foreign one is FORBIDDEN (slots/7.4)."},
	{ID: "slots/7.6", Says: "A daemon restart does not end the execution: its lease is restored, the proxy re-binds it, and the restarted daemon records itself as the slot's owner.",
		Tests: []string{e2eRestartKeeps, e2eProxyRestart, e2eKill9Outage}},
	{ID: "slots/7.7", Says: "While no daemon answers, tool calls answer DAEMON_STALLED with recovery wait_for_managed_reclaim; the proxy never starts a daemon itself, keeps probing at its heartbeat interval, and reclaims the execution when one answers.",
		Tests: []string{e2eProxyRestart, unitHoldAndStall}},
	{ID: "slots/7.8", Says: "The first answer after a reclaim carries daemon_restart_resumed (a restarted daemon) or daemon_stall_resumed (the same one).",
		Tests: []string{e2eProxyRestart, unitHoldAndStall}},
	{ID: "slots/7.9", Says: "A restarted daemon waits about eight seconds (lease plus suspect grace) for the owner to come back.", ADR: adrSlotsYield,
		Note: "simlock keeps a restored execution's lease for `slots.rebindWindowMs` (2 minutes by default), so a kill -9 and a restart a dozen seconds later do not end it."},
	{ID: "slots/7.10", Says: "Once the execution ended, every answer and the resource give the daemon's release reason, or session-not-found only when the daemon named none.",
		Tests: []string{e2eConfEndReason}},
	{ID: "slots/7.11", Says: "While the execution lives, a duplicate proxy for its slot is refused with the retryable SLOT_IN_USE, through any daemon of the host.",
		Tests: []string{e2eSixSteps, e2eTwoDaemons, e2eFlood, unitFlood}},
	{ID: "slots/7.12", Says: "When the execution ends (stdin EOF, a signal, the owner's loss) the proxy cancels its own calls in flight, then releases the execution within a bounded wait.",
		Tests: []string{e2eSigterm, e2eOwnerExit, unitHoldAndStall}},
	{ID: "slots/7.13", Says: "The daemon waits a bounded time for the execution's released work: settled, the slot is reusable_for_this_slot; not settled, it is marked settling (SLOT_SETTLING, retryable) before its owner clears, until the work ends or its daemon is proven dead.",
		Tests: []string{unitReleaseSettles, unitForce}},
	{ID: "slots/7.14", Says: "The proxy's release wait is about 1.5 s, and the daemon gives in-flight work about 500 ms within a 700 ms release budget.", ADR: adrDrainAndCodes,
		Tests: []string{unitReleaseBudget},
		Note:  "simlock's daemon waits up to 5 s for the device's released work, and the proxy waits up to 11 s (that wait plus the registry's busy wait), both from one contract constant."},
	{ID: "slots/7.15", Says: "A drain's registry step that fails (lookup, settling mark, owner clear, return to ready) is retried with backoff until it lands, and a slot whose mark is owed reads in use from every daemon meanwhile.", ADR: adrDrainAndCodes,
		Note: "simlock's registry is one SQLite file whose busy lock each step waits out; a step that still fails is reported (slot.release fails) or logged (the background settle), not retried."},
	{ID: "slots/7.16", Says: "A release, whatever its reason (explicit, heartbeat loss, idle, owner exit), clears the owner and keeps the device assignment and spec.",
		Tests: []string{e2eSixSteps, e2eOwnerExit, e2eSigterm, unitIdleEnds}},
	{ID: "slots/7.17", Says: "A new proxy for the same scoped slot with a matching spec reuses the assigned device under a fresh lease.",
		Tests: []string{e2eSixSteps, e2eLifecycle}},

	// 8. Idle and liveness.
	{ID: "slots/8.1", Says: "About ten seconds after the owner's last heartbeat the execution is released; other callers' calls do not keep it alive.",
		Tests: []string{e2eConfEndReason},
		Note:  "The test freezes the proxy past the lease's TTL and sees the daemon end it for expiry; that nobody else's calls renew it follows from the owner token (slots/7.4)."},
	{ID: "slots/8.2", Says: "The idle window defaults to 2 minutes, may be set from 2 to 60 minutes, and the granted window is reported as idleTimeoutMs; a restarted daemon keeps the configured one.",
		Tests: []string{unitIdleEnds, unitRehydratedIdle, unitOwnerIdle}},
	{ID: "slots/8.3", Says: "An idle release is terminal: later calls answer MANAGED_EXECUTION_ENDED with relaunch_execution, the reason, idle true, the slot index and generation, and the device stays assigned for the next execution.",
		Tests: []string{unitIdleEnds, unitIdleResource}},
	{ID: "slots/8.4", Says: "After the end, reads naming a device still work, and a direct daemon client sees session_ownership_lost with idle true.", ADR: adrNotInSimlock,
		Note: "Every tool call after the end answers MANAGED_EXECUTION_ENDED (ADR 0050's state gate), and a socket client's heartbeat or release answers MANAGED_EXECUTION_ENDED with idle true; there is no session_ownership_lost."},
	{ID: "slots/8.5", Says: "Each second the proxy checks its execution owner (executionOwnerPid, or the launch parent and whether it was re-parented); the owner's loss, like stdin EOF, ends the execution and releases it.",
		Tests: []string{e2eOwnerExit, unitOwnerWatch, unitHoldAndStall}},
	{ID: "slots/8.6", Says: "The registry's owner record names the daemon holding the execution, by pid and process start identity, never the proxy or executionOwnerPid; a dead record alone never keeps a slot in use.",
		Tests: []string{unitOwnerDaemon}},

	// 9. Spec matching.
	{ID: "slots/9.1", Says: "An omitted spec field is unconstrained, and what the request resolved to is recorded apart from what it asked for, so a changed default never forces a replacement.",
		Tests: []string{unitOmitted}},
	{ID: "slots/9.2", Says: "An empty slot gets a device made from the spec (created), unless a free-pool device of a retired scope matches and is adopted.",
		Tests: []string{unitReconcile, e2eSixSteps}},
	{ID: "slots/9.3", Says: "An assigned, matching device is reused with a fresh lease, and recreated if it was deleted out of band.",
		Tests: []string{unitReconcile, e2eLifecycle}},
	{ID: "slots/9.4", Says: "A non-matching device is replaced: deleted, its absence proven from a fresh listing, and only then the new device made and recorded in the same slot.",
		Tests: []string{e2eSixSteps, e2eLifecycle, e2eReplaceListings, unitFreshListing}},
	{ID: "slots/9.5", Says: "A deletion that fails keeps the old assignment, cleanup_pending; a partial inventory never leads to a replacement (DISCOVERY_INCOMPLETE).",
		Tests: []string{unitFailedDelete, unitPartial}},
	{ID: "slots/9.6", Says: "Boot capacity is checked before the old device is deleted, so a replacement refused at the limit leaves it in place.",
		Tests: []string{unitCapacityFirst}},
	{ID: "slots/9.7", Says: "A device made for a slot gets a generated name carrying the scope prefix, slot and generation, to be treated as opaque.",
		Tests: []string{e2eLifecycle, e2eSixSteps},
		Note:  "`simlock-slot-<scope prefix>-<slot>-g<n>-<suffix>`; the slot tables know the device by its stable id."},
	{ID: "slots/9.8", Says: "Destructive replacement on a spec mismatch exists only for slots; the generic provisioning tool keeps its identity-conflict answer.", ADR: adrNotInSimlock,
		Note: "simlock has no generic provisioning tool; a plain request never replaces anyone's device for its spec (the backbone's pool makes or evicts devices by its own rules)."},

	// 10. Scope reset and abandonment.
	{ID: "slots/10.1", Says: "A new incarnation for the same host scope and namespace retires the old scope once nothing of it runs, settles, awaits cleanup or has open journal work; until then it gets the retryable SCOPE_TRANSITION_PENDING.",
		Tests: []string{e2eTransition, unitTransition}},
	{ID: "slots/10.2", Says: "The retired scope's devices go to a free pool that only slots can adopt; other namespaces are untouched.",
		Tests: []string{e2eSixSteps, unitTransition, unitFreePool}},
	{ID: "slots/10.3", Says: "Requests with the retired incarnation are refused SCOPE_INVALIDATED, for good.",
		Tests: []string{e2eSixSteps, e2eLifecycle}},
	{ID: "slots/10.4", Says: "The operator's reset takes the namespace and incarnation (the host scope optional) and a bounded wait; it exits 0 once invalidated, 2 while it waits on owners or cleanup, 1 when no scope matched, and is idempotent.",
		Tests: []string{e2eLifecycle, e2eTransition}},
	{ID: "slots/10.5", Says: "--force abandons only a slot stuck settling (past the settlement cap, or its daemon gone), never a live owner, and lists each slot it leaves with a typed reason and what to do.",
		Tests: []string{unitForce, unitResetPending}},
	{ID: "slots/10.6", Says: "The reset is refused against a shared daemon namespace unless deliberately allowed.", ADR: adrNotInSimlock,
		Note: "simlock has no shared resident daemon to hit by accident: `slot reset-scope` talks to its own home's daemon, and the scopes are the host registry's."},
	{ID: "slots/10.7", Says: "A scope idle for an hour with no live owner is abandoned, and the same incarnation coming back revives it (revived true).",
		Tests: []string{unitAbandoned}},
	{ID: "slots/10.8", Says: "An abandoned scope's devices are journaled for deletion; a journaled delete completes before the slot gets a new device at a later generation.", ADR: adrNotInSimlock,
		Note: "simlock's sweep only marks a scope abandoned and deletes nothing: every slot keeps its device, and a revived scope keeps its assignments."},

	// 11. Results and failure.
	{ID: "slots/11.1", Says: "A ready result rides the initialize answer's experimental capabilities and is served as a JSON resource.",
		Tests: []string{e2eSixSteps, e2eConfEndReason}},
	{ID: "slots/11.2", Says: "The initialize capability is a snapshot; the resource adds executionEnded to a slot whose lease ended for good, keeping the other fields.",
		Tests: []string{unitIdleResource, e2eConfEndReason}},
	{ID: "slots/11.3", Says: "The result gives contractVersion, the scope (its parts and key), the outcome, idleTimeoutMs, a failure, and per slot its generation, device, lease, requested and resolved spec, fingerprint, disposition, readiness and decision trail."},
	{ID: "slots/11.4", Says: "scopeKey is null only when the acquisition failed before the scope resolved.",
		Tests: []string{e2eConfScopeKey, unitProxyScopeKey}},
	{ID: "slots/11.5", Says: "A failed acquisition still serves MCP: initialize says failed with the typed failure, no tools are listed, and every call is MANAGED_SLOT_ACQUISITION_FAILED carrying that failure.",
		Tests: []string{e2eMalformed, e2eConfAndroid36, unitFailedServes}},
	{ID: "slots/11.6", Says: "Launch-config errors come before the server starts, and the process exits with the code's own status.",
		Tests: []string{unitCLIConfigError}},
	{ID: "slots/11.7", Says: "Acquisition-level failures include the retired scope, a pending transition and the deadline.",
		Tests: []string{e2eSixSteps, e2eTransition, unitDeadline},
		Note:  "The deadline is PREPARATION_TIMEOUT; a lost daemon mid-acquisition is CONNECTION_LOST (slots/11.4)."},

	// 12. Enforcement.
	{ID: "slots/12.1", Says: "Reads stay open on a managed connection; only control and lifecycle outside the slot are refused.",
		Tests: []string{unitConfinement, e2eSixSteps}},
	{ID: "slots/12.2", Says: "A plain caller that drives, releases or leases a slot's or the free pool's device gets the non-retryable DEVICE_ASSIGNED_TO_MANAGED_SLOT, which no force overrides.",
		Tests: []string{e2eLifecycle, e2eSixSteps, e2eSharedRoot}},
	{ID: "slots/12.3", Says: "A managed connection reaching past its slot gets the non-retryable DEVICE_OUTSIDE_MANAGED_SLOTS with a reason: device, session, tool, scope or host.",
		Tests: []string{unitConfinement, e2eSixSteps}},
	{ID: "slots/12.4", Says: "Lifecycle tools are refused with reason tool even on the connection's own slot device.",
		Tests: []string{e2eSixSteps, unitConfinement}},
	{ID: "slots/12.5", Says: "The same confinement covers a managed connection's direct socket frames and its multi-device plan labels.", ADR: adrNotInSimlock,
		Note: "The slot proxy exposes no socket frames or plans; the daemon behind it refuses the slot's lease to anyone but its execution and pins device.exec to the lease's device (ADR 0050)."},
	{ID: "slots/12.6", Says: "The generic pool never counts an assigned or free-pool device as capacity, idle or not.", ADR: adrSlotsYield,
		Tests: []string{unitAssignedOnly, e2eYieldPlain, e2eIdleShutdown},
		Note:  "No plain request is granted one, and none is ever deleted for the pool; but an idle slot device yields its running room (it is shut down, keeping its assignment) to a waiting request."},
	{ID: "slots/12.7", Says: "Slot tables that were never readable refuse allocation with the retryable DISCOVERY_INCOMPLETE; a later failed read keeps the last good snapshot.",
		Tests: []string{"internal/daemon.TestSlotTablesNeverReadRefuseAllocationAndALaterFailedReadKeepsTheMap", "internal/core.TestUnknownSlotAssignmentsHandOutNoDevice"}},

	// 13. Boot capacity.
	{ID: "slots/13.1", Says: "A slot that must boot at a platform's limit is refused at once with the retryable CAPACITY_EXHAUSTED, carrying retryAfterMs, the limit, the booted count, the platform and externalDevices.",
		Tests: []string{e2eReuseAtLimit, e2eReuseAfterReboot, unitAcquireRefuse, unitReuseAtLimit}},
	{ID: "slots/13.2", Says: "Every cold boot at the limit, not only a slot's, is refused at once instead of waiting.", ADR: adrNotInSimlock,
		Tests: []string{e2ePrincipalBound},
		Note:  "The backbone wins for the core: a plain lease waits in the fair queue (or is refused with --no-wait). Slot boots are refused at once, and one principal's running slot devices are bounded too."},

	// 14. Error codes.
	{ID: "slots/14.1", Says: "MANAGED_SLOT_CONFIG_INVALID, CONTRACT_UNSUPPORTED and MANAGED_SLOT_GROUP_UNSUPPORTED are not retryable.",
		Tests: []string{unitCLIConfigError}},
	{ID: "slots/14.2", Says: "SPEC_UNSUPPORTED, not retryable, answers a malformed spec or one this host has not installed, and nothing is changed.",
		Tests: []string{e2eMalformed, e2eConfAndroid36, unitUninstalled, unitSpecForm}},
	{ID: "slots/14.3", Says: "RUNTIME_INCOMPATIBLE answers an installed runtime that is unavailable or outside the model's supported range.", ADR: adrDrainAndCodes,
		Note: "simlock answers SPEC_UNSUPPORTED, not retryable and changing nothing, with the cause (OS_VERSION_OUT_OF_RANGE, RUNTIME_MISSING) in details.cause; RUNTIME_INCOMPATIBLE is in the table and not answered."},
	{ID: "slots/14.4", Says: "SLOT_IN_USE, SLOT_SETTLING, SCOPE_TRANSITION_PENDING, CLEANUP_PENDING, DISCOVERY_INCOMPLETE and CAPACITY_EXHAUSTED are retryable; SCOPE_INVALIDATED is not.",
		Tests: []string{e2eLifecycle, e2eTransition, unitFailedDelete, unitPartial, unitAcquireRefuse}},
	{ID: "slots/14.5", Says: "STALE_SESSION answers an earlier execution's lease on the slot device that could not be released.", ADR: adrDrainAndCodes,
		Note: "An earlier execution's live lease makes the slot SLOT_IN_USE, and its unfinished release SLOT_SETTLING; simlock has no separate session to fail releasing, so the code is not answered."},
	{ID: "slots/14.6", Says: "Every failure carries retryable and a next action, and the two agree with its message.",
		Tests: []string{e2eConfOtherHome, unitAcquireRefuse},
		Note:  "Every contract error carries retryable and nextAction by construction (one error table); the e2e checks the two agree with the message for the other-home refusal, the case that disagreed."},
	{ID: "slots/14.7", Says: "DISCOVERY_INCOMPLETE, retryable, says absence cannot be proven.", ADR: adrOtherHome,
		Tests: []string{unitPartial, e2eConfOtherHome},
		Note:  "Kept for a partial inventory or registry read. A slot whose device lives in another home, a case the reference cannot reach, is refused DEVICE_OUTSIDE_MANAGED_SLOTS (reason host, not retryable) instead."},

	// 15. End-to-end example.
	{ID: "slots/15.1", Says: "The six steps: create, release keeping the device, another runner refused it and given its own, reuse under a fresh lease, replace on a spec change, and a new incarnation adopting while the old one is SCOPE_INVALIDATED.",
		Tests: []string{e2eSixSteps, e2eLifecycle}},
	{ID: "slots/15.2", Says: "The malformed Android runtime `android-36` serves MCP in under a second: failed, SPEC_UNSUPPORTED, no tools, every call refused, no emulator made.",
		Tests: []string{e2eConfAndroid36}},
}
