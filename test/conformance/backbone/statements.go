// Package backbone is the conformance suite of the simlock backbone: the
// architecture reference (simlock-architecture.txt) statement by
// statement, proven through the surfaces a user of the backbone has: the
// CLI (lease, release, status, exec, run), the raw socket protocol, the
// HTTP API, MCP, the Go client and a gateway fronting workers.
//
// statements.go is the registry: each statement of the reference, by its
// section, paraphrased, with the tests that prove it or the ADR that
// decided a deviation. Most of the backbone is proven by the e2e tests
// (test/e2e) and the unit tests of internal/...; the conformance tests of
// this package prove what none of those asserted, and mark it with
// harness.Proves. `go run ./internal/tools/conformance` writes
// docs/conformance.md from it.
package backbone

import "github.com/simlock/simlock/test/conformance"

// Contract is the backbone registry.
var Contract = conformance.Contract{
	Name:      "backbone",
	Title:     "Simlock backbone",
	Reference: "simlock-architecture.txt",
	Surface:   "the CLI (`lease`, `release`, `status`, `exec`, `run`), the raw socket protocol, the HTTP API, MCP, the Go client, and a gateway over workers",
	Sections: conformance.Headings("Overview and the frontends", "Gateway and worker modes (summary)",
		"Contract, dispatcher, and roles", "Protocol versions", "Roles: principal, requester, owner",
		"Socket identity", "Admin authority", "Two daemon shapes", "The uplink", "Worker views",
		"Worker registry and drain", "Fleet queue and dispatch", "Routing", "Leases through a gateway",
		"device.exec", "Aggregation and gateway events", "Gateway failure modes", "Gateway safety",
		"The gateway's import boundary", "Core and drivers", "Device roots and containment", "Capacity",
		"Restart and startup convergence", "Device lifecycle", "Warm pool and quarantine",
		"Measured timings and reclaim strategies", "Leases", "Release hands the purge off",
		"The lease subsystem's modules", "Leased-device health monitor", "Cleanup rules", "Event bus",
		"Driver diagnostics and component installs", "Ports", "IPC lifecycle",
		"Startup: claim first, converge after", "Operational logging", "Device identity and downloads"),
	Unlisted: "The reference text carries no headings of its own (they did not survive its conversion to text); " +
		"its sections are numbered here by its topic blocks in the text's order, named as the text names them where it cites itself " +
		"(\"Gateway and worker modes\", \"Contract, dispatcher, and roles\", \"Startup: claim first, converge after\", " +
		"\"Release hands the purge off\"). Every block states requirements, so none is left out. Statements about how the " +
		"reference's TypeScript source is laid out (file paths, class names, zod) are held against what they guarantee, " +
		"and where simlock's Go structure differs in shape only, ADR 0087 says so.",
	Statements: statements,
}

// Test names, shared by several statements.
const (
	e2eLeaseWait     = "test/e2e.TestLeaseWaitReleaseAndExpiry"
	e2eKill9         = "test/e2e.TestKill9KeepsLeaseWithSameDeadline"
	e2eSecondDaemon  = "test/e2e.TestSecondDaemonIsRefusedBeforeDeviceWork"
	e2eRaw           = "test/e2e.TestRawProtocolRefusals"
	e2eSignal        = "test/e2e.TestHeldLeaseIsReleasedOnSignal"
	e2ePassthrough   = "test/e2e.TestScopedPassthrough"
	e2eExec          = "test/e2e.TestDeviceExecStreamsOutputAndExitCode"
	e2eLeaseGone     = "test/e2e.TestHolderLearnsAtOnceThatItsLeaseIsGone"
	e2eHTTP          = "test/e2e.TestHTTPAPIWithAnAgentToken"
	e2eMCP           = "test/e2e.TestMCPAgentLeasesThroughTheRealBinary"
	e2eMCPRestart    = "test/e2e.TestMCPLeaseSurvivesADaemonRestart"
	e2eClientModule  = "test/e2e.TestAnotherModuleHoldsALeaseAcrossARestart"
	e2eGwRoutes      = "test/e2e.TestGatewayRoutesLeasesAcrossWorkers"
	e2eGwDisconnect  = "test/e2e.TestWorkerDisconnectKeepsItsViewAndLeases"
	e2eGwWarmDrain   = "test/e2e.TestGatewayWarmHitQueueStatusDrainAndRestart"
	e2eGwCatalog     = "test/e2e.TestConfBBGatewayCatalogAndStatusNameTheirWorkers"
	e2eGwGroup       = "test/e2e.TestGatewayGroupLeaseLivesOnOneWorker"
	e2ePurgeOrder    = "test/e2e.TestConfBBPurgeFailureIsPublishedBeforeItsQuarantine"
	e2eOutOfRange    = "test/e2e.TestConfBBOSOutOfRangeNamesTheModelsRange"
	e2eHTTPCancel    = "test/e2e.TestConfBBDeletingAQueuedHTTPRequestCancelsIt"
	e2eRunTerm       = "test/e2e.TestConfBBRunTerminatedWhileQueuedGivesUpItsPlace"
	e2ePlaceholders  = "test/e2e.TestConfBBPlaceholdersWorkInRunExecAndMCP"
	e2eGwPlaceholder = "test/e2e.TestConfBBPlaceholdersThroughAGateway"
	e2eCrash         = "test/e2e.TestKilledDeviceIsRecoveredThenLost"
	e2eEraseFail     = "test/e2e.TestEraseFailureQuarantinesThenRecovers"
	e2eEraseForever  = "test/e2e.TestPersistentEraseFailureDestroysAfterRetries"
	e2eReleaseFast   = "test/e2e.TestReleaseReturnsWhileThePurgeRuns"
	e2eMidPurge      = "test/e2e.TestDaemonKilledMidPurgeRecoversTheDevice"
	e2eNuke          = "test/e2e.TestNukeLeavesNothingInTheRoot"
	e2eNever         = "test/e2e.TestDownloadPolicyNeverRefusesAtOnce"
	e2eOnRequest     = "test/e2e.TestDownloadOnRequestInstallsWithProgress"
	e2eInstallFail   = "test/e2e.TestFailedInstallEndsAsInstallFailed"
	e2eInstallLies   = "test/e2e.TestInstallerThatLiesEndsAsInstallFailed"
	e2eAndroidImage  = "test/e2e.TestAndroidImageDownloadOnRequest"
	e2eDefaultSet    = "test/e2e.TestDefaultSetLeavesTheUsersSimulatorAlone"
	e2eRun           = "test/e2e.TestRunGivesTheCommandTheDeviceAndItsExitCode"
	e2eExecPinned    = "test/e2e.TestExecIsPinnedToTheLeasedDevice"
	e2eSlowClient    = "test/e2e.TestAStoppedLeaseHolderDelaysNobody"
	e2eAndroidPorts  = "test/e2e.TestTwoHomesGetTheirOwnAndroidPortsAndAdbServers"
	e2eConsoleGw     = "test/e2e.TestConsoleGatewayShowsADrainedWorker"
	e2eGwMetrics     = "test/e2e.TestGatewayMetricsShowUplinksDrainAndFleetGrants"
	e2eUploadGw      = "test/e2e.TestUploadThroughAGatewayInstallsOnTheWorkersEmulator"
	e2eOpenAPIClient = "test/e2e.TestGeneratedClientLeasesADevice"
	e2eDurable       = "test/e2e.TestIdempotentLeaseSurvivesKill9"
	e2eMetrics       = "test/e2e.TestMetricsAuditTrailAndEventsJournalAfterDemoTraffic"

	archContract    = "internal/arch.TestContractImportsOnlyTheStandardLibrary"
	archDispatch    = "internal/arch.TestDispatchKnowsOnlyTheContract"
	archGateway     = "internal/arch.TestGatewayNeverSeesADriver"
	archWaitq       = "internal/arch.TestWaitQueueImportsOnlyTheStandardLibrary"
	archPorts       = "internal/arch.TestCoreReachesTheWorldOnlyThroughPorts"
	archDriversBus  = "internal/arch.TestDriversNeverSeeTheEventBusOrTheDaemon"
	archClock       = "internal/arch.TestNoDirectClockInCoreOrDrivers"
	dispPipeline    = "internal/dispatch.TestPipelineOrderDecodeRoleAuthorize"
	dispPark        = "internal/dispatch.TestRequestsParkUntilReadyButStatusAnswers"
	dispFailedStart = "internal/dispatch.TestFailedStartupRejectsParkedRequests"
	httpSameErrors  = "internal/transport/httpapi.TestSocketAndHTTPRefuseWithIdenticalErrorObjects"
	httpAuth        = "internal/transport/httpapi.TestAuthMatrix"
	httpHealthz     = "internal/transport/httpapi.TestHealthzAnswersWithoutAToken"
	httpHelloToken  = "internal/transport/httpapi.TestHelloTakesRoleAndPrincipalFromTheToken"
	httpNotices     = "internal/transport/httpapi.TestRenewCarriesLeaseNotices"
	httpRealDaemon  = "internal/transport/httpapi.TestRealDaemonLeaseOverHTTP"
	mcpTools        = "internal/transport/mcp.TestToolsListShowsFourToolsWithSchemas"
	mcpProgress     = "internal/transport/mcp.TestProgressOnlyWithAProgressToken"
	mcpRenew        = "internal/transport/mcp.TestRenewTimerKeepsTheLeaseAlive"
	mcpSessionEnd   = "internal/transport/mcp.TestSessionEndReleasesTheLease"
	mcpReconnect    = "internal/transport/mcp.TestReconnectPicksUpTheSurvivingLease"
	mcpReconcile    = "internal/transport/mcp.TestReconnectReconcilesWithTheDaemon"
	mcpNoLaunch     = "internal/transport/mcp.TestRenewTimerReconnectsButNeverLaunches"
	mcpForbidden    = "internal/transport/mcp.TestReleasingAnotherPrincipalsLeaseIsForbidden"
	mcpStatus       = "internal/transport/mcp.TestLeaseStatusRelease"
	uplinkLines     = "internal/transport/uplink.TestUplinkCarriesLinesBothWays"
	uplinkRefusals  = "internal/transport/uplink.TestUplinkRefusals"
	uplinkRedial    = "internal/transport/uplink.TestConnectorRedialsAfterADisconnect"
	uplinkURL       = "internal/transport/uplink.TestValidateURL"
	cfgGateway      = "internal/config.TestGatewayModeRules"
	cfgDefaults     = "internal/config.TestDefaultsAreValid"

	gwRegister     = "internal/gateway.TestRegisterCoversEveryOperationButTheDaemonsOwn"
	gwUnsupported  = "internal/gateway.TestWorkerOnlyOperationsAreUnsupported"
	gwWarmHit      = "internal/gateway.TestWarmHitPreferredThenFreeCapacity"
	gwSkipped      = "internal/gateway.TestDrainedAndIncompatibleWorkersAreSkipped"
	gwProgress     = "internal/gateway.TestProgressDispatchesAndRelays"
	gwStale        = "internal/gateway.TestStaleNoCapacityStaysQueuedUntilTheViewRefreshes"
	gwBackstop     = "internal/gateway.TestRefusalWaitsForANewerViewThenTheBackstopTickRetries"
	gwNoWait       = "internal/gateway.TestNoWaitAndQueueTimeout"
	gwCancel       = "internal/gateway.TestCancelAndQueuePositions"
	gwCancelWorker = "internal/gateway.TestCancelReachesTheWorkerOnceDispatched"
	gwSplit        = "internal/gateway.TestLeaseIDsSplitAndForward"
	gwUnreachable  = "internal/gateway.TestRenewOnADisconnectedWorkerIsUnreachable"
	gwOnePerReq    = "internal/gateway.TestOneLeasePerRequesterAcrossTheFleet"
	gwIndex        = "internal/gateway.TestIndexRebuiltOnReconnectAndRestart"
	gwExecHops     = "internal/gateway.TestExecOwnershipOnBothHops"
	gwExecBackstop = "internal/gateway.TestExecBackstopTimeout"
	gwDrainPersist = "internal/gateway.TestDrainPersistsAcrossRestarts"
	gwRetention    = "internal/gateway.TestRetentionAndRemove"
	gwAggregate    = "internal/gateway.TestStatusCatalogAndListAggregate"
	gwRepublish    = "internal/gateway.TestWorkerEventsAreRepublished"
	gwRejected     = "internal/gateway.TestRejectedAndSupersededUplinks"
	gwTerminal     = "internal/gateway.TestTerminalFailuresAfterDispatch"
	gwTTL          = "internal/gateway.TestTTLBounds"
	gwIncompatible = "internal/gateway.TestAWorkerWhoseHelloFailedShowsAsIncompatible"
	gwQueueStatus  = "internal/gateway.TestStatusNumbersTheFleetQueue"
	gwCatalog      = "internal/gateway.TestCatalogNamesTheWorkersOfEachEntryAndLeasesCarryWorkerID"
	gwWarmThenFree = "internal/gateway.TestWarmThenFree"
	gwClaimBooks   = "internal/gateway.TestClaimBooksCapacityWithinAPass"
	gwVersion      = "internal/gateway.TestVersionPrefix"
	gwGap          = "internal/gateway.TestWorkerGapIsRelayedInPlace"
	gwIdempotency  = "internal/gateway.TestIdempotencyKeyIsRefusedNotDropped"

	coreFirst        = "internal/core.TestFirstRequestProvisionsBootsAndGrants"
	coreNoWait       = "internal/core.TestNoWaitRefusesWhenFullAndWaiterGetsReleasedDevice"
	coreTimeout      = "internal/core.TestQueueTimeout"
	coreExpiry       = "internal/core.TestLeaseExpiresAndDeviceReturnsToPool"
	coreRenewWidth   = "internal/core.TestRenewReappliesStoredWidthAndCapsTTL"
	coreOnePerReq    = "internal/core.TestOneLeasePerRequesterNamesExistingLease"
	coreRestart      = "internal/core.TestRestartRestoresLeaseWithRenewedDeadline"
	corePassedOver   = "internal/core.TestRequestNoDeviceCanServeIsPassedOver"
	coreLRU          = "internal/core.TestWarmDeviceOfOtherSpecIsEvictedLRU"
	coreBootShutdown = "internal/core.TestShutdownDeviceIsBootedBeforeProvisioningANewOne"
	corePurgeFail    = "internal/core.TestPurgeFailureQuarantines"
	coreIllegal      = "internal/core.TestIllegalTransitions"
	coreNoDouble     = "internal/core.TestNoDoubleGrantUnderContention"
	coreFootprints   = "internal/core.TestResourceStrategyUsesTheDriversFootprints"
	coreRAM          = "internal/core.TestOneRAMBudgetAcrossPlatforms"
	coreQRetry       = "internal/core.TestQuarantineRetryRecoversThePurgedDevice"
	coreQExhaust     = "internal/core.TestQuarantineExhaustionDestroysNeverShutsDown"
	coreQRestart     = "internal/core.TestQuarantineRetrySurvivesRestart"
	coreCrash        = "internal/core.TestCrashIsDebouncedThenRecoveredUnderTheSameLease"
	coreTooMany      = "internal/core.TestTooManyCrashesEndTheLeaseAsDeviceLost"
	coreVanished     = "internal/core.TestVanishedDeviceAndProvenanceDriftGiveUp"
	coreCleanup      = "internal/core.TestCleanupRulesShutdownThenDestroyAndPressureShortensTheWait"
	coreCleanupLease = "internal/core.TestCleanupNeverTouchesLeasedDevices"
	coreDoctor       = "internal/core.TestDoctorFindsAndFixes"
	coreNuke         = "internal/core.TestNukeReleasesCancelsAndDestroysEverything"
	coreBootFail     = "internal/core.TestBootFailureQuarantinesAndTheRetryRecovers"
	coreSweep        = "internal/core.TestConvergeSweepOverIOSLimitKeepsAndroidWarm"
	coreCommitOrder  = "internal/core.TestConcurrentGrantsAndReleasesReachSubscribersInCommitOrder"
	coreDurableGrant = "internal/core.TestGrantIsAnsweredOnlyOnceItsCommitIsDurable"
	coreDurableRenew = "internal/core.TestRenewIsAnsweredOnlyOnceItsDeadlineIsDurable"
	coreFailedCommit = "internal/core.TestFailedGrantCommitAnswersNoOneAndFencesTheEngine"
	coreOpHooks      = "internal/core.TestOpHooksSeeEveryOperationAndMayRefuse"
	coreNoWaitSide   = "internal/core.TestNoWaitRefusalHasNoSideEffects"
	coreRecoveryRel  = "internal/core.TestReleaseDuringCrashRecoveryWaitsForItAndEmitsNoRecovered"
	coreStopReaper   = "internal/core.TestStopJoinsTheReapersDestroyInFlight"
	corePurgeOrder   = "internal/core.TestPurgeFailedIsPublishedBeforeTheQuarantineItCauses"
	coreStatusSnap   = "internal/core.TestStatusIsOneSnapshot"
	corePlatformCap  = "internal/core.TestAndroidBlockedByItsPlatformLimitEvictsNoIPhone"
	coreGeneralPool  = "internal/core.TestGeneralPoolMayUse"
	coreReconcile    = "internal/core.TestReconcileReadyDebouncesAMissingDevice"
	busSlow          = "internal/core/events.TestSlowSubscriberNeverBlocksPublisher"
	busRing          = "internal/core/events.TestRingKeepsNewestAndNamesTheGap"
	busJournal       = "internal/core/events.TestContinueFromNumbersAfterTheJournal"

	dmnFilesOwner   = "internal/daemon.TestFilesAreOwnerOnly"
	dmnTokens       = "internal/daemon.TestTokensResolveRoles"
	dmnOwnership    = "internal/daemon.TestLeaseVisibilityAndOwnership"
	dmnQueue        = "internal/daemon.TestQueueProgressAndCancel"
	dmnEvents       = "internal/daemon.TestEventsFollowSeesLeaseFacts"
	dmnGraceful     = "internal/daemon.TestGracefulStopRemovesTheAdminSecretAndSocket"
	dmnSecond       = "internal/daemon.TestSecondDaemonOnSameHomeIsRefused"
	dmnPolicyNever  = "internal/daemon.TestDownloadPolicyNeverOverridesTheRequest"
	dmnLeaseLost    = "internal/daemon.TestLeaseLostReachesTheOwnerAfterAFlood"
	dmnExec         = "internal/daemon.TestExecStreamsOutputAndChecksTheRequester"
	dmnExecTimeout  = "internal/daemon.TestExecTimeoutKillsTheCommand"
	dmnExecReleased = "internal/daemon.TestExecEndsWhenItsLeaseIsReleased"
	dmnRequesterNS  = "internal/daemon.TestRequesterIDsAreScopedToTheirPrincipal"
	dmnReleaseAll   = "internal/daemon.TestReleaseAllIsScopedToTheCallersRequester"
	dmnAudit        = "internal/daemon.TestAuditLinesNameLeaseRequesterOwnerAndDevice"

	iosScoped       = "internal/drivers/ios.TestEveryCommandIsScopedToTheRoot"
	iosPassthrough  = "internal/drivers/ios.TestResolvePassthrough"
	iosPinned       = "internal/drivers/ios.TestPinnedSimctlNamesOnlyTheLeasedDevice"
	iosReclaim      = "internal/drivers/ios.TestReclaim"
	iosRevalidate   = "internal/drivers/ios.TestRevalidateRoot"
	iosListManaged  = "internal/drivers/ios.TestListManaged"
	iosResolve      = "internal/drivers/ios.TestResolve"
	iosDownload     = "internal/drivers/ios.TestResolveSpecDownload"
	iosOutOfRange   = "internal/drivers/ios.TestOutOfRangeNamesTheRangeEvenWhenARuntimeDroppedTheModel"
	iosBootStatus   = "internal/drivers/ios.TestParseBootStatusProgress"
	andContainment  = "internal/drivers/android.TestRootContainment"
	andPassthrough  = "internal/drivers/android.TestResolvePassthrough"
	andMembership   = "internal/drivers/android.TestListManagedFromMembership"
	andBaseline     = "internal/drivers/android.TestMakeReadyFirstBootCapturesBaseline"
	andReclaim      = "internal/drivers/android.TestReclaimRestoresBaseline"
	andWipe         = "internal/drivers/android.TestReclaimWipesWhenBaselineInvalid"
	andBootDone     = "internal/drivers/android.TestBootCompleted"
	andDiskGuard    = "internal/drivers/android.TestResolveSpecDownloadNeedsDisk"
	andPorts        = "internal/drivers/android.TestADBServerEnvironmentSwitchesDiscoveryOff"
	devrootRevalid  = "internal/drivers/devroot.TestRevalidate"
	reqOutOfRange   = "internal/requirements.TestOSOutOfRangeNamesTheTypesRange"
	portsRotate     = "internal/ports.TestRotatingFileKeepsOneGeneration"
	portsAtomic     = "internal/ports.TestWriteFileAtomicIsOwnerOnlyAndReplaces"
	cliLeaseLine    = "internal/cli.TestLeaseLineIsTheContractLeasePlusRole"
	cliSignal       = "internal/cli.TestSignalContextNamesTheSignal"
	cliStartWaits   = "internal/cli.TestDaemonStartWaitsForTheStartupConvergence"
	cliStartFailed  = "internal/cli.TestDaemonStartReportsAFailedConvergence"
	cliWorkerOnWork = "internal/cli.TestWorkerCommandOnAWorkerPointsAtTheGateway"
	cliRunSubst     = "internal/cli.TestRunSubstitutesThePlaceholders"
	waitqOrder      = "internal/waitq.TestOrderAndRemoval"
	waitqPassOver   = "internal/waitq.TestFindTakesTheOldestMatch"
	fakeClock       = "internal/ports/fake.TestTimersFireInDeadlineOrderOnlyOnAdvance"
)

// ADRs of deliberate deviations.
const (
	adrGoShape      = "0087" // the reference's TypeScript layout, held to its guarantees in Go
	adrContractInGo = "0001"
	adrDefaultSet   = "0033"
	adrUploads      = "0034"
	adrDeviceTools  = "0035"
	adrClones       = "0041"
	adrGroups       = "0043"
	adrWriter       = "0044"
	adrJournal      = "0028"
)

var statements = []conformance.Statement{
	// 1. Overview and the frontends.
	{ID: "backbone/1.1", Says: "The CLI, the stdio MCP server and the HTTP frontend are thin siblings over one typed contract; the core cannot tell which of them asked.",
		Tests: []string{httpSameErrors, archDispatch, e2eHTTP, e2eMCP}},
	{ID: "backbone/1.2", Says: "The HTTP frontend calls the very dispatcher the socket uses, in process, not through the socket, and asks every route but the health check for a bearer token.",
		Tests: []string{httpSameErrors, httpAuth, httpHealthz, e2eHTTP}},
	{ID: "backbone/1.3", Says: "HTTP grants the same TTL lease as every other frontend; there is no second lease model for the network.",
		Tests: []string{e2eHTTP, httpRealDaemon}},
	{ID: "backbone/1.4", Says: "By default `simlock lease` prints one JSON line, stays in the foreground renewing at a third of the TTL, and releases on exit, on its parent's death, or on SIGINT/SIGTERM; `--detach` prints the same lease and leaves.",
		Tests: []string{e2eSignal, e2eLeaseWait, e2eRunTerm}},
	{ID: "backbone/1.5", Says: "The CLI streams progress as JSON lines on stderr.",
		Tests: []string{e2eOnRequest, e2eLeaseWait}},
	{ID: "backbone/1.6", Says: "The MCP server offers leasing and releasing only, does nothing the typed client cannot, serialises its tool calls, and answers lease_status with one lease.list.", ADR: adrDeviceTools,
		Tests: []string{mcpTools, mcpStatus, e2eMCP},
		Note:  "The four lease tools are the default surface; device and resource tools exist too, opt-in (`--device-tools`, `--enable-tool`) and confined to the session's own lease."},
	{ID: "backbone/1.7", Says: "The MCP session lets the daemon refuse a release of a lease it lacks: the answer is the daemon's FORBIDDEN, with no guard of its own in front.",
		Tests: []string{mcpForbidden}},
	{ID: "backbone/1.8", Says: "The MCP session renews on a timer and gives its lease back when it exits, and relays request progress as notifications/progress only when the client gave a progress token.",
		Tests: []string{mcpRenew, mcpSessionEnd, mcpProgress, e2eMCP}},
	{ID: "backbone/1.9", Says: "The MCP process outlives a daemon connection: on a tool call it reconnects, starting a daemon when nothing listens; on the renew timer it reconnects only to a daemon already listening and never starts one.",
		Tests: []string{mcpNoLaunch, mcpReconnect, e2eMCPRestart}},
	{ID: "backbone/1.10", Says: "After a reconnect the MCP session finds its surviving lease through lease.list and keeps it instead of asking for a second device.",
		Tests: []string{mcpReconnect, mcpReconcile, e2eMCPRestart}},
	{ID: "backbone/1.11", Says: "The daemon owns all state and serialises all decisions; it starts on demand and is reached over a unix socket.",
		Tests: []string{coreNoDouble, e2eLeaseWait}},

	// 2. Gateway and worker modes (the summary; each point is specified again in sections 8 to 19).
	{ID: "backbone/2.1", Says: "A daemon is a worker by default; a gateway owns no devices and fronts the workers that connect to it.",
		Tests: []string{cfgDefaults, e2eGwRoutes}},
	{ID: "backbone/2.2", Says: "Workers dial out to the gateway: a worker joins with a gateway URL and a worker-role join token, and the gateway's is the fleet's only inbound port.",
		Tests: []string{e2eGwRoutes, uplinkRedial}},
	{ID: "backbone/2.3", Says: "A worker-role token opens an uplink and is refused (403) on every other route; agent and operator tokens are refused at the uplink.",
		Tests: []string{httpAuth, e2eGwRoutes, uplinkRefusals}},
	{ID: "backbone/2.4", Says: "Every frontend (CLI, MCP, HTTP, the Go client) needs no change to talk to a gateway, which serves the very same contract.",
		Tests: []string{e2eGwRoutes, e2eGwPlaceholder, e2eConsoleGw, e2eUploadGw}},
	{ID: "backbone/2.5", Says: "A closed uplink shows the worker disconnected at once with its last known state; the view is forgotten only after its leases' deadlines and the retention have passed, or by `worker remove`, which refuses a connected worker.",
		Tests: []string{e2eGwDisconnect, gwRetention}},
	{ID: "backbone/2.6", Says: "A gateway answers UNSUPPORTED_IN_GATEWAY_MODE for nuke, cleanup, doctor and passthrough, forwards the lease lifecycle and device.exec, and answers reads for the whole fleet.",
		Tests: []string{gwUnsupported, gwRegister, e2eGwRoutes}},

	// 3. Contract, dispatcher, and roles.
	{ID: "backbone/3.1", Says: "Every operation is declared once, with its name, role, input and output types and an optional authorisation hook; the public types are those declarations.", ADR: adrContractInGo,
		Tests: []string{gwRegister, e2eOpenAPIClient},
		Note:  "Declared in Go (package contract) rather than as zod schemas; the OpenAPI document is generated from the same types (ADR 0029)."},
	{ID: "backbone/3.2", Says: "The contract imports nothing of the core, the daemon or the drivers, and the daemon maps its private records onto contract shapes in one place.",
		Tests: []string{archContract, archDispatch}},
	{ID: "backbone/3.3", Says: "One dispatcher runs, in order: decode the input, answer FORBIDDEN to a caller whose role is too low, apply the authorise hook, park on startup readiness (all but status.get), call the handler; handlers do no role checks of their own.",
		Tests: []string{dispPipeline, dispPark, e2eRaw}},
	{ID: "backbone/3.4", Says: "Socket and HTTP share that one dispatcher, so a refusal, the download policy and readiness parking read the same on both.",
		Tests: []string{httpSameErrors, dmnPolicyNever}},

	// 4. Protocol versions.
	{ID: "backbone/4.1", Says: "Protocol ranges are negotiated at hello and today both sides speak only 5; an older client gets PROTOCOL_VERSION_UNSUPPORTED with both ranges.",
		Tests: []string{e2eRaw}},
	{ID: "backbone/4.2", Says: "daemon.stop is accepted whatever protocol the client speaks, so an upgrade can always stop the old daemon first."},
	{ID: "backbone/4.3", Says: "The same negotiation runs on a worker's uplink, so an older worker appears incompatible in the gateway's views.",
		Tests: []string{gwIncompatible, gwSkipped}},

	// 5. Roles: principal, requester, owner.
	{ID: "backbone/5.1", Says: "There are two roles: agent for reads and one's own lease lifecycle, admin for anything reaching beyond one's own leases (list.get, cleanup, nuke, config.get, daemon.stop, events, tokens).",
		Tests: []string{e2eRaw, httpAuth, dmnOwnership}},
	{ID: "backbone/5.2", Says: "doctor.run's role depends on its input: a read-only run is an agent's, a fixing run needs admin."},
	{ID: "backbone/5.3", Says: "The principal is fixed at hello for the connection's life (for HTTP, from the token).",
		Tests: []string{httpHelloToken, e2eRaw}},
	{ID: "backbone/5.4", Says: "A lease request's requester id defaults to the principal, and one lease per requester is keyed on it, so one connection may hold several leases for several requesters.",
		Tests: []string{coreOnePerReq, dmnRequesterNS, e2eLeaseWait}},
	{ID: "backbone/5.5", Says: "The lease stores the granting principal as its owner; renew, release and list compare it to the caller, and admin bypasses the check.",
		Tests: []string{dmnOwnership, e2eRaw, dispPipeline}},

	// 6. Socket identity.
	{ID: "backbone/6.1", Says: "Identity on the socket is taken on trust: the OS user, through owner-only files and socket, is the real boundary, and ownership checks guard against accidents, not a hostile local process.",
		Tests: []string{dmnFilesOwner, e2eRaw}},

	// 7. Admin authority.
	{ID: "backbone/7.1", Says: "Admin authority needs a credential shown in the hello; the socket alone never confers it: an operator token (stored hashed), the per-start admin secret, or the worker's own uplink.",
		Tests: []string{dmnTokens, e2eRaw}},
	{ID: "backbone/7.2", Says: "The admin secret is new on every start, kept only as a hash in memory, written owner-only to admin.token after the socket claim, and removed by a graceful stop.",
		Tests: []string{dmnGraceful, dmnFilesOwner, e2eSecondDaemon, portsAtomic}},
	{ID: "backbone/7.3", Says: "A worker grants admin to the uplink session it opened itself, to the gateway its own config names, with that config's token.",
		Tests: []string{e2eGwRoutes},
		Note:  "Shown by the gateway's admin calls (list.get, config.get, events.subscribe) succeeding on its workers."},
	{ID: "backbone/7.4", Says: "A bad or absent credential makes hello fail with ADMIN_AUTHENTICATION_FAILED, and nothing else runs on that connection first.",
		Tests: []string{e2eRaw, dmnTokens}},
	{ID: "backbone/7.5", Says: "Besides --token and SIMLOCK_ADMIN_TOKEN, the CLI reads the local admin.token file, and while it can read it connects as admin, so a detached lease can be renewed or released by a later invocation.",
		Tests: []string{e2eLeaseWait, e2eKill9}},
	{ID: "backbone/7.6", Says: "When no credential is found, the CLI carries on as an agent with a one-line notice, the lease line names the role it got, and an agent can renew only what its own principal was granted.",
		Tests: []string{cliLeaseLine, e2eHTTP}},
	{ID: "backbone/7.7", Says: "A credential is never logged nor returned by an operation; tokens are stored hashed.",
		Tests: []string{dmnTokens}},

	// 8. Two daemon shapes.
	{ID: "backbone/8.1", Says: "config.mode picks worker (the default: drivers, roots, registry, capacity, reaper, health, leases) or gateway (no devices: a fleet queue, worker views and routing); one daemon runs one of them.",
		Tests: []string{cfgGateway, cfgDefaults, e2eGwRoutes}},
	{ID: "backbone/8.2", Says: "A client tells the two apart only by `mode` in status.get's daemon block.",
		Tests: []string{gwAggregate}},
	{ID: "backbone/8.3", Says: "There is no hybrid mode: a machine that fronts a fleet and owns devices runs a gateway and a worker in two homes.",
		Tests: []string{cfgGateway, e2eGwRoutes}},

	// 9. The uplink.
	{ID: "backbone/9.1", Says: "A worker configured with a gateway URL and join token dials one WebSocket to <url>/v1/uplink when it starts and redials with backoff whenever it drops, presenting its join token and instance id.",
		Tests: []string{uplinkRedial, uplinkLines, e2eGwDisconnect}},
	{ID: "backbone/9.2", Says: "At the uplink no token or an unknown one gets 401, a known token of a role other than worker gets 403, nothing is registered, and worker.rejected is published.",
		Tests: []string{uplinkRefusals, gwRejected, e2eGwRoutes}},
	{ID: "backbone/9.3", Says: "Over the uplink the gateway is the protocol client: it sends hello and then plain contract calls, framed as the socket's newline-delimited JSON framing.",
		Tests: []string{uplinkLines, e2eGwRoutes}},
	{ID: "backbone/9.4", Says: "Only ws:// and wss:// gateway URLs load; http(s) URLs are refused.",
		Tests: []string{cfgGateway, uplinkURL}},
	{ID: "backbone/9.5", Says: "A disconnected worker keeps its last view, is never dispatched to, and its retention clock is held while leases the gateway issued on it are still within their deadlines.",
		Tests: []string{gwRetention, e2eGwDisconnect}},

	// 10. Worker views.
	{ID: "backbone/10.1", Says: "A view (id, label, health, version, protocol range, capacity, queue depth, leases, devices, catalog, download policy, drain state) is built on connect from status.get, list.get, catalog.get, config.get and events.subscribe.",
		Tests: []string{gwAggregate, gwIncompatible}},
	{ID: "backbone/10.2", Says: "A worker event touching leases or capacity refreshes status and list, and a slow periodic tick backs that up.",
		Tests: []string{gwBackstop, e2eGwRoutes}},
	{ID: "backbone/10.3", Says: "config.get is read once per connect, and only the effective download policy is kept from it, as a routing input the worker still clamps.",
		Tests: []string{gwWarmThenFree}},
	{ID: "backbone/10.4", Says: "Views are never persisted: a gateway restart rebuilds them from the workers that reconnect; the worker id is its stable instance identity, and the label is display-only.",
		Tests: []string{gwIndex, e2eGwWarmDrain}},
	{ID: "backbone/10.5", Says: "A view may lag a moment; a NO_CAPACITY answer from a worker is read as a stale view, not a failure.",
		Tests: []string{gwStale}},

	// 11. Worker registry and drain.
	{ID: "backbone/11.1", Says: "worker.list returns the views; drain, undrain and remove are the operator's edits, and a drained worker keeps its leases and gets no new dispatches.",
		Tests: []string{gwSkipped, e2eGwRoutes, e2eConsoleGw}},
	{ID: "backbone/11.2", Says: "The drained set is the one persisted piece of gateway state, kept owner-only, and outlasts the worker reconnecting as well as the gateway restarting; only undrain ends a drain.",
		Tests: []string{gwDrainPersist, e2eGwWarmDrain}},

	// 12. Fleet queue and dispatch.
	{ID: "backbone/12.1", Says: "A gateway lease request enters one fleet FIFO where timeoutMs, noWait, lease.cancel and the queued progress with its position behave exactly as a worker's do.",
		Tests: []string{gwNoWait, gwCancel, gwQueueStatus, e2eGwWarmDrain}},
	{ID: "backbone/12.2", Says: "Dispatch runs on every change of the queue or a view, oldest first, and sends the chosen worker lease.request with noWait set, so no fleet request waits in a worker's queue.",
		Tests: []string{gwProgress, gwStale, e2eGwWarmDrain}},
	{ID: "backbone/12.3", Says: "A request is dispatched once its worker grants it or sends the first progress push; only an immediate NO_CAPACITY returns it to the queue, and a failure after work began is its own end.",
		Tests: []string{gwProgress, gwStale, gwTerminal}},
	{ID: "backbone/12.4", Says: "A request that no worker can take yet is skipped, and never holds up those queued after it.",
		Tests: []string{gwWarmThenFree, gwClaimBooks}},

	// 13. Routing.
	{ID: "backbone/13.1", Says: "Routing is a pure function of the views behind one entry point: leave out workers that are away, drained, incompatible or missing the platform, model or runtime (a runtime to download counts only where that worker's policy permits it), prefer a ready unleased match, else the most free running capacity.",
		Tests: []string{gwWarmThenFree, gwWarmHit, gwSkipped, e2eGwWarmDrain}},
	{ID: "backbone/13.2", Says: "Lease requests look identical whether sent to a worker or a gateway; routing has no further placement rule.",
		Tests: []string{e2eGwRoutes, gwWarmThenFree}},

	// 14. Leases through a gateway.
	{ID: "backbone/14.1", Says: "The gateway passes renew, release and reads of one lease on to the worker holding it; the expiry clients see comes from that worker, and the gateway runs no lease timer.",
		Tests: []string{gwSplit, gwTTL, e2eGwRoutes}},
	{ID: "backbone/14.2", Says: "Through a gateway a lease id joins the worker id and that worker's own lease id with a dot, and requests route by splitting on the first dot.",
		Tests: []string{gwSplit, e2eGwRoutes}},
	{ID: "backbone/14.3", Says: "A lease through a gateway carries worker {id, label}, never a worker's network address.",
		Tests: []string{e2eGwWarmDrain, e2eGwCatalog}},
	{ID: "backbone/14.4", Says: "One lease per requester holds across the fleet: a second request gets REQUESTER_ALREADY_LEASED naming the lease, from an index rebuilt from the workers' lease lists by the gateway's requester prefix.",
		Tests: []string{gwOnePerReq, gwIndex, e2eGwRoutes}},
	{ID: "backbone/14.5", Says: "The gateway forwards requester ids as gw:<its instance id>:<requester> yet shows clients their leases under the requester id they asked with.",
		Tests: []string{gwIndex, gwOnePerReq, e2eGwRoutes}},
	{ID: "backbone/14.6", Says: "A client connection closing costs it nothing at the gateway, which holds no lease state per connection.",
		Tests: []string{e2eGwRoutes, gwSplit}},
	{ID: "backbone/14.7", Says: "Progress, lease-lost, device-unhealthy and device-recovered pushes are relayed to the gateway connection owning the request or lease.",
		Tests: []string{gwProgress, gwRepublish, dmnLeaseLost},
		Note:  "Progress relay is asserted through the gateway; lease-scoped facts are republished with the owner translated back to the client's principal, and the gateway daemon pushes them with the same observer a worker uses."},

	// 15. device.exec.
	{ID: "backbone/15.1", Says: "device.exec runs a simctl or adb command for a lease, resolved by the same passthrough logic (root scope, refusal list: PASSTHROUGH_REFUSED, UNKNOWN_PASSTHROUGH_TOOL), streams stdout and stderr as request pushes, and answers with the exit code.",
		Tests: []string{e2eExec, dmnExec, iosPassthrough}},
	{ID: "backbone/15.2", Says: "Through exec, `adb shell` given no command is refused because it would need a terminal.",
		Tests: []string{andPassthrough}},
	{ID: "backbone/15.3", Says: "Ownership is checked on both hops; on exec admin does not bypass: the supplied requester must be the lease's, or FORBIDDEN.",
		Tests: []string{e2eExec, gwExecHops, dmnExec}},
	{ID: "backbone/15.4", Says: "The gateway relays exec's pushes unchanged; output is streamed, not capped, and the worker's exec timeout (10 min) is the one that normally fires, the gateway's (11 min) only a backstop.",
		Tests: []string{gwExecBackstop, dmnExecTimeout, e2eGwRoutes, "test/e2e.TestExecStreams200MBWithFlatDaemonMemory"}},
	{ID: "backbone/15.5", Says: "stdin is one string sent with the request and there is no pseudo-terminal."},
	{ID: "backbone/15.6", Says: "Artifacts for exec reach the worker out of band; an upload through the daemon is left for later.", ADR: adrUploads,
		Note: "simlock built that seam: ordered upload chunks into a per-lease scratch directory, gone with the lease, also through a gateway (ADR 0034)."},
	{ID: "backbone/15.7", Says: "An HTTP agent can run exec on a single worker directly, without any gateway.",
		Tests: []string{e2eHTTP}},

	// 16. Aggregation and gateway events.
	{ID: "backbone/16.1", Says: "A gateway's status.get has a worker's shape, capacity summed over connected workers and the fleet queue's depth, plus a workers array, and every device and lease names its workerId.",
		Tests: []string{gwAggregate, gwCatalog, e2eGwCatalog, e2eGwWarmDrain}},
	{ID: "backbone/16.2", Says: "A gateway's catalog.get unites the workers' catalogs and says which workers have each model and runtime.",
		Tests: []string{gwCatalog, e2eGwCatalog}},
	{ID: "backbone/16.3", Says: "The gateway publishes its workers' events again on its own bus, each tagged with workerId, so following a gateway's events shows the fleet.",
		Tests: []string{gwRepublish, gwGap, e2eGwRoutes}},
	{ID: "backbone/16.4", Says: "Facts of the gateway's own are published too: worker connected, disconnected, rejected, removed, drain started and ended (worker.*), and request.dispatched.",
		Tests: []string{gwSkipped, gwRetention, gwRejected, gwProgress, e2eGwRoutes}},

	// 17. Gateway failure modes.
	{ID: "backbone/17.1", Says: "With the uplink down nothing is dispatched to that worker, and a renew or release of a lease on it fails WORKER_UNREACHABLE; only the worker may declare such a lease ended.",
		Tests: []string{gwUnreachable, e2eGwDisconnect}},
	{ID: "backbone/17.2", Says: "An uplink lost after dispatch answers WORKER_UNREACHABLE; a lease the worker did grant lives there on its TTL.",
		Tests: []string{gwTerminal, gwUnreachable}},
	{ID: "backbone/17.3", Says: "A gateway restart loses in-flight requests; leases live on in their workers, and the views, the lease index and the drained set come back (the last from disk).",
		Tests: []string{gwIndex, gwDrainPersist, e2eGwWarmDrain, gwIdempotency}},
	{ID: "backbone/17.4", Says: "An incompatible worker is shown with both ranges, never dispatched to, and never hidden.",
		Tests: []string{gwIncompatible, gwSkipped}},

	// 18. Gateway safety.
	{ID: "backbone/18.1", Says: "The gateway never acts on a device; allowDownload travels on to the worker, whose own download policy limits it.",
		Tests: []string{archGateway, gwWarmThenFree}},
	{ID: "backbone/18.2", Says: "Machine-wide operations stay per worker (UNSUPPORTED_IN_GATEWAY_MODE), and config.get on a gateway answers the gateway's own config.",
		Tests: []string{gwUnsupported, gwRegister, e2eGwRoutes}},

	// 19. The gateway's import boundary.
	{ID: "backbone/19.1", Says: "The gateway is a second set of handlers for the same contract, reading worker views and forwarding over uplinks.",
		Tests: []string{gwRegister, archGateway}},
	{ID: "backbone/19.2", Says: "The gateway imports no driver and from the core uses only the shared wait queue and event bus; a boundary test enforces it.",
		Tests: []string{archGateway, archWaitq}},

	// 20. Core and drivers.
	{ID: "backbone/20.1", Says: "The core (lease table, fair queue, registry, capacity behind a strategy, state machine, reaper, health monitor, bus, warm pool) is platform-agnostic and written once.",
		Tests: []string{archPorts, archDispatch}},
	{ID: "backbone/20.2", Says: "Platform mechanisms sit behind a narrow driver interface (resolve, provision, make ready, reclaim, shut down, destroy, estimate, list managed).",
		Tests: []string{coreFirst, archPorts}},
	{ID: "backbone/20.3", Says: "A third driver must need no change to the core.", ADR: adrGoShape,
		Note: "A design litmus, not a behaviour: what a test can hold is that the core imports no driver (internal/arch); the selftest and the simulated SDK drive both platforms through the same interface."},

	// 21. Device roots and containment.
	{ID: "backbone/21.1", Says: "Every driver works in a directory simlock created and marked as its own, and confines each platform command there (simctl --set; ANDROID_AVD_HOME and a private adb server).",
		Tests: []string{iosScoped, andContainment, andPorts, e2eAndroidPorts}},
	{ID: "backbone/21.2", Says: "Devices in a root are invisible to a plain simctl or adb, and simlock has no reach beyond that root.", ADR: adrDefaultSet,
		Tests: []string{e2eLeaseWait, e2eAndroidPorts},
		Note:  "Owned roots are the default; an opt-in default-set mode puts devices in Xcode's set so xcodebuild sees them, and proves simlock's own by record and mark, never touching the user's (ADR 0033)."},
	{ID: "backbone/21.3", Says: "Passthrough and exec share one resolution and one refusal list (no simctl delete, no adb kill-server, nothing that alters a device's life without the registry knowing); they differ only in who spawns the process.",
		Tests: []string{e2ePassthrough, e2eExec, iosPassthrough, andPassthrough}},
	{ID: "backbone/21.4", Says: "The tool's own exit code comes back unchanged through passthrough.",
		Tests: []string{e2ePassthrough}},
	{ID: "backbone/21.5", Says: "A driver proves it owns its root at start-up and proves it afresh just before an orphan purge deletes anything.",
		Tests: []string{iosRevalidate, devrootRevalid}},
	{ID: "backbone/21.6", Says: "listManaged answers from root membership, not a name prefix; a device found in the root yet unknown to the registry is an orphan.",
		Tests: []string{iosListManaged, andMembership, coreDoctor}},
	{ID: "backbone/21.7", Says: "The core hands each driver its root inside that driver's own config entry, which the core treats as opaque.", ADR: adrGoShape,
		Tests: []string{archPorts},
		Note:  "The daemon, not the core, reads drivers.<platform>.* and builds each driver with its root; the core never sees a root path."},

	// 22. Capacity.
	{ID: "backbone/22.1", Says: "Managed-device limits govern provisioning and running limits govern anything that starts a device; a strategy (resource: machine-derived with a RAM budget; fixed) supplies them.",
		Tests: []string{coreFootprints, coreRAM, e2eLeaseWait}},
	{ID: "backbone/22.2", Says: "Devices that are ready, leased, reclaiming or quarantined are charged as running; the overall and per-platform limits are judged in one step, and no contention grants past them.",
		Tests: []string{coreNoDouble, corePlatformCap, corePurgeFail}},

	// 23. Restart and startup convergence.
	{ID: "backbone/23.1", Says: "A restart restores every lease's persisted deadline and re-arms quarantine retries from their stored next-retry time.",
		Tests: []string{coreRestart, coreQRestart, e2eKill9}},
	{ID: "backbone/23.2", Says: "A restart releases nothing: no orphan sweep, and a lease whose deadline passed while no daemon ran expires through the ordinary path.",
		Tests: []string{e2eKill9, e2eClientModule, coreRestart}},
	{ID: "backbone/23.3", Says: "A foreground `simlock lease` exits with status 1 once its daemon is gone; the lease itself remains, for a later invocation to renew in time.",
		Tests: []string{e2eClientModule}},
	{ID: "backbone/23.4", Says: "Convergence recovers interrupted unleased reclaims, then shuts down excess unleased ready devices; leased devices are never touched, even over a lowered limit.",
		Tests: []string{e2eMidPurge, coreSweep}},

	// 24. Device lifecycle.
	{ID: "backbone/24.1", Says: "One lifecycle for both platforms (provisioning, ready, leased, reclaiming, ready or shutdown, deleted, with quarantined beside them); every transition goes through the core.",
		Tests: []string{coreIllegal, coreStatusSnap}},

	// 25. Warm pool and quarantine.
	{ID: "backbone/25.1", Says: "A warm device is any managed, unleased ready device: derived, not a state.",
		Tests: []string{coreGeneralPool, e2eLeaseWait}},
	{ID: "backbone/25.2", Says: "A release always purges while reclaiming, then the device is ready if capacity permits, shut down otherwise, or quarantined if the purge failed.",
		Tests: []string{e2eReleaseFast, corePurgeFail, e2eEraseFail}},
	{ID: "backbone/25.3", Says: "Demand may evict the least recently used warm device before starting requested work.",
		Tests: []string{coreLRU, coreBootShutdown}},
	{ID: "backbone/25.4", Says: "A quarantined device stays registered and counts as running but no grant path selects it (grants pick ready devices by exact state); a purge failure and a stalled transition are its two ways in.",
		Tests: []string{corePurgeFail, coreBootFail, coreDoctor}},
	{ID: "backbone/25.5", Says: "Quarantine retries the operation that failed on a clock-driven backoff; success returns the device to the pool, an exhausted budget destroys it (never merely shuts it down).",
		Tests: []string{coreQRetry, coreQExhaust, e2eEraseFail, e2eEraseForever}},
	{ID: "backbone/25.6", Says: "device.purge-failed is published, and device.quarantined, device.quarantine-recovered and device.quarantine-abandoned follow it.",
		Tests: []string{e2ePurgeOrder, corePurgeOrder}},

	// 26. Measured timings and reclaim strategies.
	{ID: "backbone/26.1", Says: "iOS reclaim is a shutdown followed by `simctl erase`.",
		Tests: []string{iosReclaim}},
	{ID: "backbone/26.2", Says: "Preparing iOS devices by erase alone keeps away from golden-device bookkeeping.", ADR: adrClones,
		Note: "simlock provisions by cloning a golden device and picks its reset kind from measured timings (ADR 0041, on by default since ADR 0053); the pool's own purge is still erase."},
	{ID: "backbone/26.3", Says: "Android reclaim restores a validated clean-baseline snapshot captured at first boot, tagged with a config hash and rebuilt when invalid, with -wipe-data as the fallback.",
		Tests: []string{andBaseline, andReclaim, andWipe}},
	{ID: "backbone/26.4", Says: "Readiness is `simctl bootstatus` on iOS and sys.boot_completed plus a stopped or unset boot animation on Android.",
		Tests: []string{iosBootStatus, andBootDone}},

	// 27. Leases.
	{ID: "backbone/27.1", Says: "Every transport grants the same lease: a TTL taken at grant from the request or else the default, capped at the maximum, with more than the maximum refused as BAD_REQUEST.",
		Tests: []string{coreRenewWidth, dmnOwnership, e2eLeaseWait}},
	{ID: "backbone/27.2", Says: "A renew re-arms the persisted deadline, so a restart restores the renewed one; a body-less renew re-applies the stored width; lastRenewedAt is stored at grant and each renew.",
		Tests: []string{coreRenewWidth, coreRestart, coreDurableRenew}},
	{ID: "backbone/27.3", Says: "Only lease.renew keeps a lease alive, the same on socket, HTTP, MCP and through a gateway; closing a connection releases nothing, and nothing is swept at startup.",
		Tests: []string{e2eKill9, e2eHTTP, mcpRenew, e2eGwRoutes, e2eClientModule}},
	{ID: "backbone/27.4", Says: "Holding is a frontend policy: the CLI and MCP renew at a third of the TTL with no TTL of their own, a renew answered UNKNOWN_LEASE stops the holder as a lease-lost push would, and the CLI holder leaves when its parent dies.",
		Tests: []string{mcpRenew, e2eLeaseGone}},
	{ID: "backbone/27.5", Says: "A holder killed with SIGKILL keeps its device held until the deadline runs out, no later than one TTL past its final renew.",
		Tests: []string{e2eLeaseWait, coreExpiry}},
	{ID: "backbone/27.6", Says: "One lease per agent, and no atomic acquisition of several devices.", ADR: adrGroups,
		Tests: []string{coreOnePerReq},
		Note:  "One lease per requester holds; a lease may hold several devices, granted all or nothing while nothing is held during the wait (ADR 0043), also through a gateway on one worker."},

	// 28. Release hands the purge off.
	{ID: "backbone/28.1", Says: "A release commits first (the lease gone, lease.released published, the device reclaiming) and returns without waiting for the purge; an expiry releases its device likewise.",
		Tests: []string{e2eReleaseFast, coreExpiry}},
	{ID: "backbone/28.2", Says: "While its purge runs the device counts as running, is not grantable, and holds a reclaim claim; a waiter for it is granted when the purge settles.",
		Tests: []string{e2eReleaseFast, coreRecoveryRel}},
	{ID: "backbone/28.3", Says: "A reset leaves no device behind, and a daemon that died mid-purge recovers the device at its next start.",
		Tests: []string{coreNuke, e2eNuke, e2eMidPurge}},
	{ID: "backbone/28.5", Says: "A graceful stop drains the purges still in flight before it disposes of its timers.",
		Tests: []string{coreStopReaper}},
	{ID: "backbone/28.4", Says: "A purge failure nobody waits for is not lost: it is device.purge-failed and a quarantined device.",
		Tests: []string{e2eEraseFail, e2ePurgeOrder}},

	// 29. The lease subsystem's modules.
	{ID: "backbone/29.1", Says: "The lease subsystem is composed of focused parts (queue, planner, provisioner and lifecycle, lease lifecycle, warm pool, capacity, operation claims, reaper, converger, nuke) joined by direct calls for transactions.", ADR: adrGoShape,
		Tests: []string{coreOpHooks, waitqOrder},
		Note:  "The parts exist under other names in internal/core; the guarantees they carry are the statements of sections 22 to 28."},
	{ID: "backbone/29.2", Says: "The serialised decision section covers only short read-decide-commit steps; driver work stays outside it, and the bus carries only post-commit facts.", ADR: adrWriter,
		Tests: []string{coreDurableGrant, coreFailedCommit},
		Note:  "The durable commit runs outside the decision section too: a decision is answered only once its commit is durable (ADR 0044)."},

	// 30. Leased-device health monitor.
	{ID: "backbone/30.1", Says: "A clock-driven monitor classifies each leased device as running, stopped or transitioning; only a run of stopped reads counts as a crash, and one running read resets the count.",
		Tests: []string{coreCrash}},
	{ID: "backbone/30.2", Says: "A crashed leased device is rebooted under the same lease (no new state, no new reservation, no erase), its data kept.",
		Tests: []string{coreCrash, e2eCrash}},
	{ID: "backbone/30.3", Says: "Provenance drift is judged only while the device is seen running.",
		Tests: []string{coreVanished}},
	{ID: "backbone/30.4", Says: "Recovery gives up (device.recovery-failed, then lease.released with reason device-lost) when the device is missing, its provenance drifted, or the reboot budget is spent.",
		Tests: []string{coreTooMany, coreVanished, e2eCrash}},
	{ID: "backbone/30.5", Says: "A confirmed crash and a recovery are pushed to the owner's live connections as device-unhealthy and device-recovered; HTTP pollers read them in the renew answer's notices.",
		Tests: []string{httpNotices, e2eHTTP, dmnLeaseLost}},

	// 31. Cleanup rules.
	{ID: "backbone/31.1", Says: "Cleanup rules are pure proposals over a read-only view; the executor revalidates ownership and lease safety before acting, and leased devices are never targets.",
		Tests: []string{coreCleanup, coreCleanupLease}},
	{ID: "backbone/31.2", Says: "Idle past T1 shuts a device down, idle past T2 destroys it, and under disk pressure the destroy waits only T1.",
		Tests: []string{coreCleanup}},
	{ID: "backbone/31.3", Says: "disk.pressure-detected is published once per crossing; each action publishes cleanup.executed with its rule and reason; a dry run only previews, and a rule is chosen by its registered name.",
		Tests: []string{coreCleanup}},

	// 32. Event bus.
	{ID: "backbone/32.1", Says: "The bus carries past-tense business facts, published only after their commit; a slow or failing observer never holds up the publisher.",
		Tests: []string{coreDurableGrant, busSlow, coreCommitOrder}},
	{ID: "backbone/32.2", Says: "The lease workflow is a direct call chain that publishes at each step but never waits on an event.",
		Tests: []string{coreDurableGrant, coreFirst}},
	{ID: "backbone/32.3", Says: "Events live in an in-memory ring that a restart empties.", ADR: adrJournal,
		Tests: []string{busRing},
		Note:  "The ring is in memory, but a bus observer also journals every fact, and numbers continue across restarts so `events --since` reads earlier runs (ADR 0028)."},

	// 33. Driver diagnostics and component installs.
	{ID: "backbone/33.1", Says: "No driver uses the event bus; what they observe they report through a diagnostic callback that the daemon turns into events.",
		Tests: []string{archDriversBus, e2eOnRequest}},
	{ID: "backbone/33.2", Says: "component.installed is published only once a re-scan confirms the component; an installer that claims success without it ends as component.install-failed, and each attempt has exactly one terminal fact.",
		Tests: []string{e2eInstallLies, e2eInstallFail, e2eOnRequest}},
	{ID: "backbone/33.3", Says: "An install first reserves disk against an estimate for its component; when that does not fit it fails at once, before any install starts.",
		Tests: []string{andDiskGuard}},

	// 34. Ports.
	{ID: "backbone/34.1", Says: "Application code reaches the filesystem, processes, the clock, sockets, system stats and parent watching only through ports, with fakes (a manual clock among them) for tests.",
		Tests: []string{archPorts, archClock, fakeClock}},

	// 35. IPC lifecycle.
	{ID: "backbone/35.1", Says: "Endpoint claiming (with stale-peer removal) is kept apart from request handling, and a client retries a missing or refusing daemon while it starts one.", ADR: adrGoShape,
		Tests: []string{e2eSecondDaemon, cliStartWaits},
		Note:  "The reference's classes (DaemonEndpointHost, IpcDaemonConnection, DaemonStartupCoordinator) are one claim step and one dialer here; the behaviour is what the tests hold."},

	// 36. Startup: claim first, converge after.
	{ID: "backbone/36.1", Says: "The socket is claimed before convergence runs, so a second daemon is refused (DAEMON_ALREADY_RUNNING) before any device work.",
		Tests: []string{e2eSecondDaemon, dmnSecond}},
	{ID: "backbone/36.2", Says: "hello and status.get answer during convergence (health starting, then running); every other request parks until it ends, so no lease is granted on half-converged state.",
		Tests: []string{dispPark, cliStartWaits, e2eKill9}},
	{ID: "backbone/36.3", Says: "A convergence that fails stops the daemon, and parked requests are refused with DAEMON_STARTUP_FAILED instead of hanging.",
		Tests: []string{dispFailedStart, cliStartFailed}},
	{ID: "backbone/36.4", Says: "The HTTP listener starts at the socket claim, before convergence, and its requests park on the same readiness gate.",
		Tests: []string{dispPark}},
	{ID: "backbone/36.5", Says: "The health monitor is armed only after convergence completes."},

	// 37. Operational logging.
	{ID: "backbone/37.1", Says: "Operational logs are structured JSON lines from a logger port, scoped per module, separate from the event bus.",
		Tests: []string{dmnAudit, e2eMetrics}},
	{ID: "backbone/37.2", Says: "daemon.log rotates to daemon.log.1 past log.rotateBytes, keeping one older generation.",
		Tests: []string{portsRotate}},
	{ID: "backbone/37.3", Says: "`simlock daemon logs` shows the older, rotated file first and the live one after it."},
	{ID: "backbone/37.4", Says: "A component installed for a request is logged durably, naming the requester when the event does."},

	// 38. Device identity and downloads.
	{ID: "backbone/38.1", Says: "A device is identified by platform, model and OS version; the OS defaults to the newest installed runtime that actually runs the model (inside its type's range and listing it).",
		Tests: []string{iosResolve, reqOutOfRange}},
	{ID: "backbone/38.2", Says: "A runtime or image that is not installed fails the lease with a clear error unless this request may download; an empty runtime list takes the same path.",
		Tests: []string{e2eOnRequest, e2eAndroidImage, iosDownload}},
	{ID: "backbone/38.3", Says: "An OS version outside the model's supported range fails at once, naming the range, and never attempts a download.",
		Tests: []string{e2eOutOfRange, iosOutOfRange, reqOutOfRange}},
	{ID: "backbone/38.4", Says: "downloads.policy is resolved in the daemon before acquisition: never refuses even an explicit --allow-download, always grants it to explicit requests, on-request follows the request's flag.",
		Tests: []string{e2eNever, dmnPolicyNever, e2eOnRequest}},
	{ID: "backbone/38.5", Says: "Only an explicit lease request can carry download permission; warm-pool provisioning and convergence reuse committed specs and never trigger a download."},
}
