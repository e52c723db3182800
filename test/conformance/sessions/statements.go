// Package sessions is the conformance suite of the session broker: the
// broker reference (automobile-session-broker.txt) statement by statement,
// proven through the surface a user of sessions has: the MCP keeper
// (`simlock mcp --session-config`), `simlock session hold`, and `simlock
// session prepare/status/info/release/abandon`.
//
// statements.go is the registry: each statement of the reference, by its
// section, paraphrased, with the tests that prove it or the ADR that
// decided a deviation. The conformance tests of this package mark what they
// prove with harness.Proves; tests elsewhere (test/e2e, unit tests) are
// named in the statement's Tests. `go run ./internal/tools/conformance`
// writes docs/conformance.md from it.
package sessions

import "github.com/simlock/simlock/test/conformance"

// Contract is the session broker registry.
var Contract = conformance.Contract{
	Name:      "sessions",
	Title:     "Session broker",
	Reference: "automobile-session-broker.txt",
	Surface:   "the MCP keeper (`simlock mcp --session-config`), `simlock session hold` and `simlock session prepare/status/info/release/abandon` against a daemon with a `sessions` section",
	Sections: conformance.Headings("Session-only provider experiment", "Timing receipts and statistics",
		"Pinned session exports", "Shutdown refusals and retry cadence", "Reuse and reset boundary",
		"Android keep-booted", "Android snapshot reset and fallback", "Native qualification summary (October 2026)",
		"Operator configuration", "Consumer contract", "Provider CLI (harness lifecycle commands, not model tools)",
		"Native device identity", "Ownership and recovery", "Upgrading from the retired device-slot system"),
	Unlisted: "Section 8 reports a native run: its timings and its remarks on throughput are measurements, not requirements, " +
		"and only the behaviours it checked are listed. Remarks that a design stays unqualified or is future work " +
		"(snapshot isolation, RPC abort propagation, folding app installation into the request) state no requirement.",
	Statements: statements,
}

// Test names, shared by several statements.
const (
	e2eOneReceipt       = "test/e2e.TestSessionPrepareIsOneReceiptAndOneDeviceAcrossKill9"
	e2eZeroPooling      = "test/e2e.TestSessionZeroPoolingDeletesBeforeCapacityReturns"
	e2eEraseReuse       = "test/e2e.TestSessionEraseReuseWipesTheFirstSessionsFile"
	e2eUnsatisfiable    = "test/e2e.TestMCPSessionConfigUnsatisfiableAnswersAtOnce"
	e2eKeepBooted       = "test/e2e.TestSessionAndroidKeepBootedCleansAndRetires"
	e2eKill9MidReset    = "test/e2e.TestSessionKill9MidResetDestroysTheUncertainDevice"
	e2eHoldRestart      = "test/e2e.TestSessionHoldKeepsTheSessionAcrossAGracefulRestart"
	e2eKeepBootedRestrt = "test/e2e.TestSessionAndroidKeepBootedSurvivesDaemonRestarts"
	e2eNeverPlainLease  = "test/e2e.TestSessionPreparationsDeviceNeverReachesAPlainLease"
	e2eDeviceCapOne     = "test/e2e.TestSessionTotalDeviceCapOneNeverHoldsTwoDevices"
	e2ePrincipal        = "test/e2e.TestSessionOwnerTokenFromAnotherPrincipalIsAWrongToken"
	e2eKeeperKilled     = "test/e2e.TestSessionKeeperKilledMidPrepareEndsTypedAndLeaksNothing"
	e2eFlood            = "test/e2e.TestSessionPrepareFloodLeavesOthersPrompt"
	e2eCutOff           = "test/e2e.TestConfSessionKeeperCutOffMidPrepareCancelsIt"
	e2eAbandonReady     = "test/e2e.TestConfSessionAbandonedReadySessionIsOneReceipt"
	e2eStopRefusals     = "test/e2e.TestConfSessionStopRefusalsAndTheInterruptedReceiptAgree"
	e2eCapRefusal       = "test/e2e.TestConfSessionCapRefusalPacesAndNamesTheCap"
	e2eUnknownKey       = "test/e2e.TestConfSessionUnknownConfigKeyIsOneCodeWithItsPath"
	e2eOwnerExit        = "test/e2e.TestConfSessionOwnerExitReleaseIsCleanupPending"

	unitReplays          = "internal/daemon.TestSessionPrepareReplaysOneReceiptAndOneDevice"
	unitPreAdmission     = "internal/daemon.TestSessionRefusalBeforeAdmissionIsStoredAndReplayed"
	unitNotConfigured    = "internal/daemon.TestSessionsNotConfigured"
	unitReleaseSettles   = "internal/daemon.TestSessionReleaseChecksTheOwnerAndSettles"
	unitAbandon          = "internal/daemon.TestSessionAbandonConsumesTheIdentity"
	unitLapse            = "internal/daemon.TestSessionHeartbeatLapseEndsAsOwnerExited"
	unitGraceful         = "internal/daemon.TestSessionGracefulRestartAdoptsTheSameSession"
	unitCrash            = "internal/daemon.TestSessionCrashEndsEverySessionAsOwnerExited"
	unitExport           = "internal/daemon.TestSessionExportPinsAndAcknowledges"
	unitExportScope      = "internal/daemon.TestSessionExportIdsAreScopedByOwner"
	unitCaps             = "internal/daemon.TestSessionCapsRefuseWithNewRequestID"
	unitStopInterrupted  = "internal/daemon.TestSessionPrepareInterruptedByAStopStoresATerminalReceipt"
	unitStopRefused      = "internal/sessions.TestSessionOperationsAreRefusedOnceTheStopBegins"
	unitIdleWindow       = "internal/daemon.TestSessionIdleWindowEndsAnUntouchedSession"
	unitEvictionPending  = "internal/daemon.TestSessionEvictionPendingWhileADestroyIsUnconfirmed"
	unitIdlePoolZero     = "internal/daemon.TestSessionIdlePoolCapZeroDestroysInsteadOfReset"
	unitAdviseNewID      = "internal/daemon.TestSessionStopInterruptedPreparationAdvisesANewRequestID"
	unitStopBegan        = "internal/daemon.TestSessionPrepareOnceTheDaemonStopBeganIsBrokerStopping"
	unitParked           = "internal/daemon.TestParkedRequestRefusedByAStopCarriesRetryAfter"
	unitOwnerExited      = "internal/daemon.TestSessionOwnerExitedReleaseAnswersCleanupPending"
	unitMemory           = "internal/daemon.TestSessionMemoryConstrainsTheLeasedSpec"
	unitDeviceCap        = "internal/daemon.TestSessionDeviceCapCountsIdleDevicesAndEvictsBeforeACreate"
	unitAbandonMidPrep   = "internal/daemon.TestSessionAbandonMidPreparationDestroysItsDevice"
	unitPermanentDestroy = "internal/daemon.TestSessionPermanentDestroyFailureIsPreparationFailed"
	unitInfoEnded        = "internal/daemon.TestSessionInfoOfAnEndedSessionAnswersOnlyItsPrincipal"
	unitKeeperGone       = "internal/daemon.TestSessionKeeperGoneMidPrepareEndsTypedAndLeaksNothing"
	unitReplyBudget      = "internal/sessions.TestConfSessionReleaseReplyBudgetIsClamped"
	unitCaptureFails     = "internal/core.TestConfSessionFailedBaselineCaptureStillGrantsAndTheReleaseDestroys"

	unitIdentity      = "internal/sessions.TestIdentityIsTheOwnerAndTheWholeConfig"
	unitStrict        = "internal/sessions.TestDecodeConfigIsStrict"
	unitUnknownPath   = "internal/sessions.TestDecodeConfigNamesTheUnknownKeysPath"
	unitStats         = "internal/sessions.TestStatsMatchAHandComputation"
	unitStatsBounds   = "internal/sessions.TestStatsBounds"
	unitPrune         = "internal/sessions.TestPruneKeepsLiveAndPinnedReceipts"
	unitUnconfirmed   = "internal/sessions.TestDecideCountsUnconfirmedDestruction"
	unitEveryDevice   = "internal/sessions.TestDecideCountsEverySessionDevice"
	unitRefusalsAgree = "internal/sessions.TestStoredRefusalsAgreeWithTheirRetryRequirement"

	unitCommitOnce    = "internal/store.TestSessionReceiptCommitsOnceAndSurvivesReopen"
	unitExportLink    = "internal/store.TestSessionExportLinksOnceAndPinsTheReceipt"
	unitTruncation    = "internal/store.TestRecentSessionReceiptsReportTruncation"
	unitStoreTooNew   = "internal/store.TestSchemaTooNewIsRefusedUntouched"
	unitHostRegTooNew = "internal/hostreg.TestNewerSchemaIsRefusedAndLeftUntouched"

	unitDestroyAbsent   = "internal/core.TestResetDestroyFreesCapacityOnlyOnceAbsent"
	unitEraseReuse      = "internal/core.TestResetEraseReusesTheDevice"
	unitEraseVerifyFail = "internal/core.TestResetEraseVerifyFailureDestroys"
	unitEraseNoVerifier = "internal/core.TestResetEraseWithoutVerifierDestroys"
	unitKBMaxUses       = "internal/core.TestResetKeepBootedCleansThenRetiresAtMaxUses"
	unitKBFallback      = "internal/core.TestResetKeepBootedFallbackChain"
	unitKBNoFallback    = "internal/core.TestResetKeepBootedWithoutFallbackDestroys"
	unitSnapshot        = "internal/core.TestResetSnapshotAndWipeData"
	unitCrashMidReset   = "internal/core.TestResetCrashMidResetDestroysOnRestart"
	unitMostRecent      = "internal/core.TestResetPrefersTheMostRecentlyReturnedDevice"
	unitResetBoots      = "internal/core.TestResetEraseBootsAreBounded"

	unitIOSErase      = "internal/simsdk.TestIOSEraseResetWipesDataAndVerifies"
	unitKBCleans      = "internal/simsdk.TestAndroidKeepBootedCleansASessionBackToTheBaseline"
	unitKBRestart     = "internal/simsdk.TestAndroidKeepBootedBaselineSurvivesADriverRestart"
	unitKBCommands    = "internal/simsdk.TestKeepBootedDeviceCommands"
	unitKBThroughCore = "internal/simsdk.TestSessionKeepBootedResetThroughTheCore"

	unitConfigValid    = "internal/config.TestSessionsValid"
	unitConfigRefusals = "internal/config.TestSessionsRefusals"
	unitConfigDefaults = "internal/config.TestSessionsEffective"

	unitResolveServes  = "internal/requirements.TestResolveServes"
	unitResolveRefuses = "internal/requirements.TestResolveRefuses"
	unitUnmappedFirst  = "internal/requirements.TestUnmappedArchetypeBeforeCatalog"

	unitMCPUnsatisfiable = "internal/transport/mcp.TestSessionConfigUnsatisfiableAnswersInitializeWithTheFailure"
	unitMCPReady         = "internal/transport/mcp.TestSessionConfigReadyIsHeldAndReleasedOnEOF"
	unitMCPCancel        = "internal/transport/mcp.TestSessionKeeperCutOffMidPreparationCancelsIt"
	unitMCPHeartbeat     = "internal/transport/mcp.TestSessionKeeperHeartbeatsAtOnce"
	unitCLINoDaemon      = "internal/cli.TestSessionCommandsNeverStartADaemon"
	unitCLIMCPChecked    = "internal/cli.TestMCPSessionConfigIsCheckedBeforeServing"
	unitHTTPRoutes       = "internal/transport/httpapi.TestSessionRoutesOverHTTP"
)

// ADRs this registry points at.
const (
	adrNoBrokerMachinery = "0081" // the broker reference's machinery simlock does not have
	adrOwnVocabulary     = "0082" // the contract in simlock's own names
	adrReceiptsBeside    = "0047" // receipts beside the lease, in the home's store
	adrBaselinePersisted = "0056" // keep-booted baselines outlive a restart
	adrExportScope       = "0058" // a prepareId is scoped by its owner
	adrBrokersMark       = "0063" // session devices carry a mark, not a name
	adrSessionsAreLeases = "0045" // one daemon serves sessions and plain leases
)

var statements = []conformance.Statement{
	// 1. Session-only provider experiment.
	{ID: "sessions/1.1", Says: "A caller asks for a device by requirement, receives a new session id, uses the device and hands it back; slots, pools and capacity are never its choice.",
		Tests: []string{e2eOneReceipt, e2eZeroPooling}},
	{ID: "sessions/1.2", Says: "The broker is something the operator turns on when starting the daemon; a client asking for sessions cannot make a plain daemon serve them.", ADR: adrOwnVocabulary,
		Tests: []string{unitNotConfigured},
		Note:  "Turned on by a `sessions` section of the daemon config, not an environment variable naming a file; without it every session call is SESSIONS_NOT_CONFIGURED and capabilities list no broker."},

	// 2. Timing receipts and statistics.
	{ID: "sessions/2.1", Says: "Receipts may carry a timing object: the acquisition record stays on the request's receipt, and a release answer adds the reset record.",
		Tests: []string{e2eZeroPooling, e2eEraseReuse}},
	{ID: "sessions/2.2", Says: "When a release answers cleanup_pending, its reset record is completed later, and the request's status shows the final one.",
		Tests: []string{e2eOwnerExit}},
	{ID: "sessions/2.3", Says: "The acquisition record names how admission went (reuse, create, evict-then-create), its outcome, the reuse count, its times and per-phase milliseconds, leaving out phases it did not measure; a reuse has no create or boot time.", ADR: adrOwnVocabulary,
		Tests: []string{e2eEraseReuse, e2eDeviceCapOne},
		Note:  "The automation phase is `readyMs`; `queueMs` is the core's real queue time, not a constant 0; there is no `wait` admission (ADR 0081)."},
	{ID: "sessions/2.4", Says: "reuseCount begins at zero and grows by one with every reuse of the device.",
		Tests: []string{e2eEraseReuse, unitEraseReuse},
		Note:  "The count is the device's clean resets (ADR 0048); a reuse whose preparation then fails is not separately asserted."},
	{ID: "sessions/2.5", Says: "The reset record gives the mode, an outcome of clean, fallback:<mode>, destroyed or pending, per-phase times, the fallback reason if any, the reuse count, timestamps and the total.", ADR: adrOwnVocabulary,
		Tests: []string{e2eEraseReuse, e2eZeroPooling, unitKBFallback},
		Note:  "Zero pooling's mode is `destroy`, where the reference says `none`."},
	{ID: "sessions/2.6", Says: "fallback:<mode> says a fallback finished and left the device fit for reuse; a failed reset keeps its reason and ends destroyed once cleanup is confirmed.",
		Tests: []string{unitKBFallback, unitEraseVerifyFail, unitSnapshot}},
	{ID: "sessions/2.7", Says: "The stats read takes a window (24 h by default, 30 days at most) and a sample limit (5000 by default, 10000 at most), and answers its bounds, the limit and whether the sample was cut.",
		Tests: []string{unitStatsBounds, unitTruncation}},
	{ID: "sessions/2.8", Says: "Stats group completed records by platform and profile, with counts, reuse hit and fallback rates, retirements, and linearly interpolated p50/p90 per phase; an empty denominator gives 0.",
		Tests: []string{unitStats, e2eEraseReuse, e2eKeepBooted}},
	{ID: "sessions/2.9", Says: "Timing and the resolved profile outlive a daemon restart and are pruned with their receipt after the retention, pinned exports aside.",
		Tests: []string{unitCommitOnce, unitPrune, e2eKill9MidReset}},
	{ID: "sessions/2.10", Says: "Stats are samples of stored receipts, newest first up to the cap, not counters kept for the daemon's life.",
		Tests: []string{unitTruncation, unitStats}},
	{ID: "sessions/2.11", Says: "What the broker logs and stores carries no owner token."},

	// 3. Pinned session exports.
	{ID: "sessions/3.1", Says: "A broker daemon lists the export contract beside the broker's, and a prepare may carry an export naming a prepareId and a request digest.",
		Tests: []string{e2eOneReceipt, unitExport}},
	{ID: "sessions/3.2", Says: "The export's link is written in the very transaction that stores the receipt, refusals before admission included; a conflicting prepareId or digest is SESSION_EXPORT_IDENTITY_MISMATCH.", ADR: adrExportScope,
		Tests: []string{unitExport, unitExportLink, unitExportScope},
		Note:  "A prepareId belongs to its owner: two owner tokens may use one prepareId independently; the mismatch holds within one owner."},
	{ID: "sessions/3.3", Says: "getExport answers the export from the receipt as it now stands, or SESSION_EXPORT_NOT_FOUND; reading it gives no control of the session.",
		Tests: []string{unitExport}},
	{ID: "sessions/3.4", Says: "acknowledgeExport answers acknowledged or unknown_export after checking owner and digest; a repeat keeps the time of the first.",
		Tests: []string{unitExport, unitExportLink}},
	{ID: "sessions/3.5", Says: "An export not yet acknowledged keeps its receipt past the terminal retention, up to the export's own maximum age; acknowledged ones go with their receipts.",
		Tests: []string{unitPrune, unitExportLink}},
	{ID: "sessions/3.6", Says: "A prepare without an export keeps the ordinary contract.",
		Tests: []string{e2eOneReceipt}},

	// 4. Shutdown refusals and retry cadence.
	{ID: "sessions/4.1", Says: "Once a stop has begun, new prepares and abandons are refused SESSION_BROKER_STOPPING, retryable after 5000 ms, storing nothing; the same identity is retried against the next daemon.",
		Tests: []string{e2eStopRefusals, unitStopBegan, unitParked, unitStopRefused}},
	{ID: "sessions/4.2", Says: "A preparation already admitted when the stop cut it short stores a terminal SESSION_BROKER_STOPPING receipt, retryable after 5000 ms with retryRequires new_request_id, and its replays give the same advice.",
		Tests: []string{e2eStopRefusals, unitAdviseNewID, unitStopInterrupted, unitRefusalsAgree}},
	{ID: "sessions/4.3", Says: "An operator's AVD snapshot maintenance refuses prepares with a maintenance code while it waits for admitted preparations to settle.", ADR: adrNoBrokerMachinery,
		Note: "No such maintenance call: a keep-booted baseline lives and dies with its AVD (ADR 0056)."},
	{ID: "sessions/4.4", Says: "Handoff-pending and configured-but-unavailable refusals carry the same 5 s pacing hint; stopping refusals log at debug level, identity mismatches warn, and a failed handoff snapshot is retried before close.", ADR: adrNoBrokerMachinery,
		Note: "A stop writes one handoff mark; there is no handoff-pending state, and log levels are not part of the contract. Calls that arrive while a daemon starts wait for it (the readiness park)."},

	// 5. Reuse and reset boundary.
	{ID: "sessions/5.1", Says: "By default nothing is pooled: every device given back is destroyed, and its capacity returns only once its absence is confirmed.",
		Tests: []string{e2eZeroPooling, unitDestroyAbsent, unitIdlePoolZero}},
	{ID: "sessions/5.2", Says: "iOS reuse is opt-in: the reset stops, erases and boots the same simulator, a fresh listing must confirm its type, runtime, availability and state, and any failure destroys it.", ADR: adrOwnVocabulary,
		Tests: []string{e2eEraseReuse, unitEraseReuse, unitEraseVerifyFail, unitEraseNoVerifier, unitIOSErase},
		Note:  "Opted into by `sessions.reset.ios: erase` with an idle pool above 0, not `reuseCleanDevices`."},
	{ID: "sessions/5.3", Says: "Android reuse has a switch of its own, off by default, choosing keep-booted cleaning or snapshot restoration.", ADR: adrOwnVocabulary,
		Tests: []string{unitConfigDefaults, e2eKeepBooted},
		Note:  "`sessions.reset.android` (`destroy` by default, `keep-booted`, `snapshot`) with an idle pool above 0."},
	{ID: "sessions/5.4", Says: "A baseline capture that fails does not fail the acquisition; that device's release then falls back or destroys.",
		Tests: []string{unitCaptureFails}},
	{ID: "sessions/5.5", Says: "A conservative activity guard turns a minimal reset off for any session that did more than read.", ADR: adrNoBrokerMachinery,
		Note: "There is no minimal reset: keep-booted cleaning always runs in full against the baseline."},

	// 6. Android keep-booted.
	{ID: "sessions/6.1", Says: "keep-booted needs Android reuse and Android defaults, and configuration validation rejects reset keys that would be ignored.",
		Tests: []string{unitConfigRefusals}},
	{ID: "sessions/6.2", Says: "androidKeepBootedMaxUses is a positive integer, 20 by default, and at that count the device is retired.",
		Tests: []string{unitConfigRefusals, unitConfigDefaults, unitKBMaxUses, e2eKeepBooted}},
	{ID: "sessions/6.3", Says: "After a restart, which forgets the reset's record kept in memory, a baseline found on disk retires its incarnation instead of being trusted.", ADR: adrBaselinePersisted,
		Tests: []string{e2eKeepBootedRestrt, unitKBRestart},
		Note:  "Stricter on reuse, not on safety: the baseline is persisted beside the AVD and trusted after a restart only while the AVD, boot token, boot id, serial and user all match."},
	{ID: "sessions/6.4", Says: "A baseline belongs to one incarnation (the device's identity and its kernel boot), so a recycled serial or a reboot never inherits one.",
		Tests: []string{unitKBRestart, unitKBCleans}},
	{ID: "sessions/6.5", Says: "The baseline records package membership per user, third-party runtime grants, global, system and secure settings, display overrides, locale, timezone, a digest of the accounts and the files under the five shared-storage roots.",
		Tests: []string{unitKBCleans, unitKBCommands}},
	{ID: "sessions/6.6", Says: "Each release uninstalls, per user, third-party packages the baseline lacks, keeps baseline apps and their data, and revokes runtime grants the baseline did not have, never resetting permissions device-wide.",
		Tests: []string{unitKBCleans, e2eKeepBooted, e2eKeepBootedRestrt}},
	{ID: "sessions/6.7", Says: "Changed or missing settings are put back; an added key is deleted only on proof the session made it, other unknown keys stay.", ADR: adrNoBrokerMachinery,
		Tests: []string{unitKBCleans, e2eKeepBooted},
		Note:  "The proof is the value the daemon can show the session set, not a journal row: simlock keeps no per-tool mutation journal."},
	{ID: "sessions/6.8", Says: "Files added under the inventoried roots are removed with path and symlink guards, and baseline paths are kept even when changed.",
		Tests: []string{unitKBCleans}},
	{ID: "sessions/6.9", Says: "The clipboard is cleared where the image supports it; an unsupported one is skipped, a failed supported clear fails the cleaning.",
		Tests: []string{unitKBCleans, unitKBCommands},
		Note:  "The tests see the clear as a cleaning phase and the simulated SDK answer an image without the service; the skip and the hard failure themselves are not asserted."},
	{ID: "sessions/6.10", Says: "Every cleaning command is bounded (2 s, 10 s for an uninstall, 30 s in all), and health afterwards is boot completion, a responsive package manager and one CtrlProxy probe.", ADR: adrNoBrokerMachinery,
		Tests: []string{unitKBMaxUses, unitKBThroughCore},
		Note:  "No CtrlProxy is installed, so health is boot completion and the package manager; the command bounds are the documented ones, not separately asserted by a test."},
	{ID: "sessions/6.11", Says: "When cleaning fails hard or the device is unhealthy afterwards, a configured snapshot fallback runs, otherwise the device is destroyed; the record then names the fallback's mode and keeps both reasons.",
		Tests: []string{unitKBFallback, unitKBNoFallback}},
	{ID: "sessions/6.12", Says: "androidKeepBootedFallback is snapshot or destroy (the default); it and maxUses are refused outside the keep-booted mode.",
		Tests: []string{unitConfigRefusals}},
	{ID: "sessions/6.13", Says: "Targeted journal reverts per kind of mutation (apps, permissions, settings, display, files, location, clipboard) run before the baseline cleaning.", ADR: adrNoBrokerMachinery,
		Note: "No mutation journal: the unconditional baseline cleaning is the whole release."},

	// 7. Android snapshot reset and fallback.
	{ID: "sessions/7.1", Says: "The snapshot mode selects full baseline restoration directly, with Android defaults and reuse on.",
		Tests: []string{unitSnapshot, unitConfigRefusals}},
	{ID: "sessions/7.2", Says: "androidResetTimeoutMs is a positive integer up to 2147483647, allowed with the snapshot mode or with keep-booted falling back to a snapshot, 600000 by default, and it bounds the whole reset.",
		Tests: []string{unitConfigRefusals, unitConfigDefaults}},
	{ID: "sessions/7.3", Says: "A failed snapshot load falls back to a wipe-data replacement of the same AVD, and when that fails too the device is destroyed.",
		Tests: []string{unitSnapshot, unitKBFallback}},
	{ID: "sessions/7.4", Says: "The snapshot baseline is a hidden one taken only on a fresh emulator, loaded only when AVD, image and emulator identities match, after proof the old process exited.", ADR: adrNoBrokerMachinery,
		Note: "The snapshot mode is the pool's own Android purge (ADR 0048), restarting from the snapshot the driver keeps, not a hidden broker baseline."},

	// 8. Native qualification summary (October 2026).
	{ID: "sessions/8.1", Says: "Past a cap the next request is refused with no tools, and its replay stays terminal, advising a new request id.",
		Tests: []string{e2eCapRefusal, unitCaps, e2eFlood}},
	{ID: "sessions/8.2", Says: "Abandoning a request the daemon never saw, one being prepared, or a ready one each ends on a terminal receipt bound to its owner, with the device confirmed gone.",
		Tests: []string{e2eNeverPlainLease, e2eAbandonReady, unitAbandon}},
	{ID: "sessions/8.3", Says: "A daemon killed mid-reset destroys the uncertain device on restart, and the request stays failed/SESSION_OWNER_EXITED, on replay too.",
		Tests: []string{e2eKill9MidReset, unitCrashMidReset}},
	{ID: "sessions/8.4", Says: "With caps of one, a change of profile confirms the old device's destruction before the next is created.",
		Tests: []string{e2eDeviceCapOne, e2eZeroPooling, unitDeviceCap}},
	{ID: "sessions/8.5", Says: "A reused iOS device carries nothing from the previous session.",
		Tests: []string{e2eEraseReuse, unitIOSErase}},

	// 9. Operator configuration.
	{ID: "sessions/9.1", Says: "The operator configuration holds limits (total devices, sessions, idle pool), per-platform defaults with a policy version, hardware mapping and OS selection, and the reuse switches.",
		Tests: []string{unitConfigValid, unitConfigRefusals}},
	{ID: "sessions/9.2", Says: "Installed profiles and device types are classified by the operator; a request for a class lands on a classified model or fails CATALOG_METADATA_INVALID.",
		Tests: []string{unitResolveRefuses, unitResolveServes}},
	{ID: "sessions/9.3", Says: "An opt-in capability lets the host serve iPhone Duo requests, with its own mapping rules.", ADR: adrNoBrokerMachinery,
		Tests: []string{unitConfigRefusals},
		Note:  "No Duo: `duo` is no archetype, and the configuration refuses it."},
	{ID: "sessions/9.4", Says: "Android OS selection is by release version, never API level, and at one release google_apis beats google_apis_playstore.",
		Tests: []string{unitResolveServes, unitResolveRefuses, unitConfigRefusals}},
	{ID: "sessions/9.5", Says: "Android hardware maps archetypes to installed profile ids with an optional memoryMb of at least 2048 that constrains both creation and reuse.",
		Tests: []string{unitConfigRefusals, unitMemory, unitResolveServes}},
	{ID: "sessions/9.6", Says: "An unmapped foldable is refused, non-retryable UNSUPPORTED_HARDWARE, before anything is reserved, and never served by phone hardware.",
		Tests: []string{unitResolveRefuses, unitUnmappedFirst, e2eUnsatisfiable}},
	{ID: "sessions/9.7", Says: "A foldable's baseline reset restores the opened posture and hinge angle before health checks.", ADR: adrNoBrokerMachinery,
		Note: "Neither the drivers nor the simulated SDK model a hinge."},
	{ID: "sessions/9.8", Says: "Caps are optional non-negative integers, and the total cap counts every device in any state: reserved, being created, in use, resetting, uncertain or not yet confirmed destroyed.",
		Tests: []string{unitConfigRefusals, unitUnconfirmed, unitEveryDevice, e2eDeviceCapOne, unitDeviceCap}},
	{ID: "sessions/9.9", Says: "A full pool confirms an eviction before it reserves a replacement; the compatible device returned most recently is chosen, and the idle one returned longest ago is evicted.",
		Tests: []string{e2eDeviceCapOne, unitMostRecent, unitEveryDevice},
		Note:  "Which of several idle devices is evicted first (the least recently used, ADR 0063) is not asserted by a test."},
	{ID: "sessions/9.10", Says: "A pending eviction or a transient destroy failure is EVICTION_PENDING, retryable after 1000 ms with a new request id, and the refused request stays failed.",
		Tests: []string{unitEvictionPending}},
	{ID: "sessions/9.11", Says: "A destroy that failed for good is non-retryable SESSION_PREPARATION_FAILED.",
		Tests: []string{unitPermanentDestroy}},
	{ID: "sessions/9.12", Says: "iOS erase resets hold a boot slot from before shutdown until their boot ends, and maxConcurrentResetBoots bounds how many run at once.",
		Tests: []string{unitResetBoots}},
	{ID: "sessions/9.13", Says: "A prepare may hold once for a fitting iOS device still resetting, when its reset should end sooner than a create and boot would.", ADR: adrNoBrokerMachinery,
		Tests: []string{unitEvictionPending},
		Note:  "No reset wait: a cap full of resetting devices answers EVICTION_PENDING at once."},
	{ID: "sessions/9.14", Says: "The device listing's capacity reports live admissions by reason (reset, create, restart).", ADR: adrNoBrokerMachinery,
		Note: "No admissionsByReason; `status` marks each session device with `ownerSystem`."},

	// 10. Consumer contract.
	{ID: "sessions/10.1", Says: "The MCP server takes the session config inline or as a path, by flag or environment, and refuses it combined with a mode that picks the device another way.",
		Tests: []string{unitCLIMCPChecked},
		Note:  "simlock has no preselected-session or direct mode; the exclusive one is `--slot-config`."},
	{ID: "sessions/10.2", Says: "The config is strict: contract version 1, a request id, the device requirement and an optional idle timeout.",
		Tests: []string{unitStrict, unitUnknownPath, e2eUnknownKey, unitPreAdmission, unitIdleWindow}},
	{ID: "sessions/10.3", Says: "The server prepares the request before it answers initialize and publishes the flat result as an experimental capability, with no resource API.", ADR: adrOwnVocabulary,
		Tests: []string{unitMCPReady, e2eUnsatisfiable},
		Note:  "The key is `experimental[\"simlock/session\"]`; a daemon without sessions answers the prepare SESSIONS_NOT_CONFIGURED, which stands in for the capability probe."},
	{ID: "sessions/10.4", Says: "When ready, the published result has the session id and the profile the requirement resolved to."},
	{ID: "sessions/10.5", Says: "While pending or once failed, the server lists no device tools, and it never turns to an ordinary lease instead.",
		Tests: []string{e2eUnsatisfiable, unitMCPUnsatisfiable}},
	{ID: "sessions/10.6", Says: "The keeper keeps the owner's session alive by heartbeats.",
		Tests: []string{e2eHoldRestart, e2ePrincipal, unitMCPReady, unitMCPHeartbeat, unitLapse}},
	{ID: "sessions/10.7", Says: "The end of stdin, or the execution owner's exit, while the preparation runs cancels it.",
		Tests: []string{e2eCutOff, unitMCPCancel}},
	{ID: "sessions/10.8", Says: "The end of stdin, or the execution owner's exit, gives a ready session back.",
		Tests: []string{unitMCPReady, e2eOwnerExit, e2eHoldRestart}},
	{ID: "sessions/10.9", Says: "The daemon protocol prepares with config and owner token, reads and abandons by request id and token, and releases by session id and token with an optional reason and reply budget.", ADR: adrOwnVocabulary,
		Tests: []string{unitHTTPRoutes, e2ePrincipal},
		Note:  "Methods `session.prepare`, `session.status`, `session.abandon`, `session.release`; the token is `ownerToken`."},
	{ID: "sessions/10.10", Says: "A client's release reads released only once cleanup is over; after committing it durably the answer waits no longer than its budget, and says cleanup_pending when that ran out.",
		Tests: []string{unitReleaseSettles, e2eZeroPooling, e2eKill9MidReset}},
	{ID: "sessions/10.11", Says: "A release sent because the execution owner died stores failed/SESSION_OWNER_EXITED, replies cleanup_pending at once and destroys the device as tracked release work.",
		Tests: []string{e2eOwnerExit, unitOwnerExited}},
	{ID: "sessions/10.12", Says: "A reconnecting proxy registers with its session id, its name and its broker identity.", ADR: adrNoBrokerMachinery,
		Tests: []string{e2eHoldRestart},
		Note:  "No registration: a keeper heartbeats its session id with its token, and a daemon that adopted the session answers it."},
	{ID: "sessions/10.13", Says: "The owner token with the whole config is the operation's identity; a replay answers the durable receipt, refusals before admission included, and never allocates a replacement.",
		Tests: []string{unitIdentity, e2eOneReceipt, unitReplays, unitPreAdmission, e2eAbandonReady}},
	{ID: "sessions/10.14", Says: "A committed receipt is never replaced by a concurrent caller's failure.",
		Tests: []string{unitCommitOnce}},
	{ID: "sessions/10.15", Says: "A new execution attempt takes a new request id, and so a new session and device.",
		Tests: []string{e2eOneReceipt}},
	{ID: "sessions/10.16", Says: "The release reply budget is 30 s by default and a per-call budget is clamped to 0..30000 ms.",
		Tests: []string{unitReplyBudget, unitConfigRefusals, e2eKill9MidReset}},
	{ID: "sessions/10.17", Says: "Each proxy release attempt asks for its remaining budget less 500 ms (at least 250 ms).", ADR: adrOwnVocabulary,
		Note: "The MCP keeper asks for a fixed 5 s; the release is durable once answered and cleanup goes on."},
	{ID: "sessions/10.18", Says: "A budget running out stops nothing on the device: that one tracked release goes on, and later calls join it.",
		Tests: []string{e2eKill9MidReset, unitReleaseSettles}},
	{ID: "sessions/10.19", Says: "A restart recovers receipts before it serves and cleans up in the background; sessions of a crashed daemon end owner-exited.",
		Tests: []string{e2eOneReceipt, unitCrash}},
	{ID: "sessions/10.20", Says: "cleanup_pending acknowledges durable release ownership, not absence; the client does not retry on it, and polls the request's receipt to learn completion.",
		Tests: []string{e2eOwnerExit, e2eKill9MidReset}},

	// 11. Provider CLI.
	{ID: "sessions/11.1", Says: "capabilities answers the daemon's contracts as they are; no daemon, a refusal or a malformed answer is a non-zero exit with one JSON failure; it never starts a daemon.", ADR: adrOwnVocabulary,
		Tests: []string{unitCLINoDaemon, e2eOneReceipt, unitNotConfigured},
		Note:  "`simlock capabilities`; the identity authority is `simlock status --json`."},
	{ID: "sessions/11.2", Says: "Every session command talks only to a daemon already running, and shows a failed receipt or unfinished cleanup just as the daemon holds it.",
		Tests: []string{unitCLINoDaemon, e2eNeverPlainLease}},
	{ID: "sessions/11.3", Says: "cleanupPending stays true while a preparation or native cleanup remains, and false means the device's absence was confirmed.",
		Tests: []string{e2eNeverPlainLease, e2eCutOff, unitAbandonMidPrep}},
	{ID: "sessions/11.4", Says: "Abandoning consumes the identity, even one never seen, and answers its terminal failed receipt; no later preparation can allocate under it.",
		Tests: []string{unitAbandon}},
	{ID: "sessions/11.5", Says: "Abandon and release get a request budget of 240 s.", ADR: adrOwnVocabulary,
		Note: "No fixed 240 s budget; a release waits at most its reply budget (30 s)."},
	{ID: "sessions/11.6", Says: "Release answers released, cleanup_pending or unknown_session.",
		Tests: []string{unitReleaseSettles, e2ePrincipal}},
	{ID: "sessions/11.7", Says: "Session info gives the bound device as description only.",
		Tests: []string{unitInfoEnded}},

	// 12. Native device identity.
	{ID: "sessions/12.1", Says: "Broker devices are named with a broker prefix (legacy slot prefixes recognized), and no device is deleted on the strength of its name.", ADR: adrBrokersMark,
		Tests: []string{e2eNeverPlainLease},
		Note:  "Ownership is a mark on the device's record for its life, not a name (ADR 0033: devices are proven by record and mark)."},
	{ID: "sessions/12.2", Says: "Broker devices count against the native budget and stay out of the ordinary pool, interrupted creations included.",
		Tests: []string{e2eNeverPlainLease, unitAbandonMidPrep, e2eDeviceCapOne}},
	{ID: "sessions/12.3", Says: "Inventory shows a broker device as held by the session broker.", ADR: adrBrokersMark,
		Tests: []string{e2eNeverPlainLease},
		Note:  "`status` and `list` show `\"ownerSystem\": \"session\"`, not `runtime.heldBy`."},

	// 13. Ownership and recovery.
	{ID: "sessions/13.1", Says: "Receipts and admission reservations live in the host registry's SQLite database, decided by immediate transactions across processes.", ADR: adrReceiptsBeside,
		Tests: []string{unitCommitOnce},
		Note:  "Receipts live in the home's store beside the lease; cross-process exclusion of devices is the host registry's claims (ADR 0020)."},
	{ID: "sessions/13.2", Says: "A registry migration unknown to the daemon puts it in a files-only mode with registry exclusion off, while writers needing current evidence fail registry_schema_unsupported.", ADR: adrNoBrokerMachinery,
		Tests: []string{unitStoreTooNew, unitHostRegTooNew},
		Note:  "A store or host registry newer than the daemon is refused untouched; there is no files-only mode."},
	{ID: "sessions/13.3", Says: "Broker mode holds a host lock, refuses to start over live generic sessions and turns legacy allocation off.", ADR: adrSessionsAreLeases,
		Note: "One daemon serves sessions and plain leases together; the broker's mark keeps their devices apart (ADRs 0063, 0081)."},
	{ID: "sessions/13.4", Says: "No tool call of a session can acquire a device outside the broker's grant.",
		Tests: []string{unitMCPReady, e2eUnsatisfiable}},
	{ID: "sessions/13.5", Says: "Interrupted requests keep durable cleanup ownership, and recovery never turns an interrupted device into a clean pool entry.",
		Tests: []string{e2eKill9MidReset, e2eNeverPlainLease, unitCrashMidReset, e2eKeeperKilled, unitKeeperGone}},
	{ID: "sessions/13.6", Says: "A graceful shutdown releases no session: it marks each live one handed off, and the next daemon adopts the same session id.",
		Tests: []string{e2eHoldRestart, unitGraceful, e2eKeepBootedRestrt}},
	{ID: "sessions/13.7", Says: "Sessions a crashed daemon held, and handed-off ones that were not adopted, end failed/SESSION_OWNER_EXITED and their devices are destroyed.",
		Tests: []string{e2eOneReceipt, unitCrash}},

	// 14. Upgrading from the retired device-slot system.
	{ID: "sessions/14.1", Says: "The older slot system is removed, and a migration retires its assignments, journals and free pool before discovery at the first start.", ADR: adrNoBrokerMachinery,
		Note: "Managed slots are a contract of their own (ADR 0049), served by the same daemon; nothing is retired."},
	{ID: "sessions/14.2", Says: "A daemon never upgrades or changes a migration it does not know.",
		Tests: []string{unitStoreTooNew, unitHostRegTooNew}},
}
