// Package resources is the conformance suite of device resources: the
// device-resources reference (automobile-device-resources.txt) statement
// by statement, proven through the surface a user of it has: `simlock
// resources groups/get/set/reconcile`, `simlock list --json` and the lease
// grant's device, and the MCP resource tools.
//
// statements.go is the registry: each statement of the reference, by its
// section, paraphrased, with the tests that prove it or the ADR that
// decided a deviation. The conformance tests of this package mark what they
// prove with harness.Proves; tests elsewhere (test/e2e, unit tests) are
// named in the statement's Tests. `go run ./internal/tools/conformance`
// writes docs/conformance.md from it.
package resources

import "github.com/simlock/simlock/test/conformance"

// Contract is the device-resources registry.
var Contract = conformance.Contract{
	Name:      "resources",
	Title:     "Device resources",
	Reference: "automobile-device-resources.txt",
	Surface:   "the CLI (`resources groups/get/set/reconcile`, `list --json`, `lease --resources`) and the MCP resource tools",
	Sections: conformance.Headings("Device resources", "Resource groups", "Observed state", "Runtime producers",
		"Configuring resources", "Reconciling workload profiles", "Automation capabilities", "Android controls",
		"Android provisioning hardware", "VM snapshot incarnation lifecycle"),
	Unlisted: "Section 1's five-emulator timing run is the reference's own test workload, and section 9's pointer to further " +
		"Android work is a cross-reference; neither states a requirement. The final paragraphs under section 10 (provenance " +
		"failure, cache resets, device-list readers) are listed there, where the reference places them.",
	Statements: statements,
}

// Test names, shared by several statements.
const (
	e2eLiveUnderRuntime  = "test/e2e.TestConfResDeviceLiveStateOnlyUnderRuntime"
	e2eEveryKey          = "test/e2e.TestDescriptionOverTheRealDriversStatesEveryKey"
	e2eSlowProbe         = "test/e2e.TestListAnswersWithinBudgetUnderASlowProbe"
	e2eOvertaken         = "test/e2e.TestConfResListOvertakenWhileWaitingIsSuperseded"
	e2eOvertakenRetry    = "test/e2e.TestConfResRetryOfAnOvertakenListingIsSuperseded"
	e2eAndroidReconcile  = "test/e2e.TestConfResReconcileOnAndroidIsRejectedBeforeAnyCommand"
	e2eIOSDisabled       = "test/e2e.TestIOSResourceGroupsAreDisabledAndObservedSo"
	e2eUnprovableProfile = "test/e2e.TestUnprovableLeaseProfileFailsAndLeavesNoDevice"
	e2eAndroidReceipt    = "test/e2e.TestAndroidRestoreReceiptRestoresExactly"

	unitDescribeIOS      = "internal/resources.TestDescribeIOSDeviceStatesEveryKey"
	unitDescribeAndroid  = "internal/resources.TestDescribeAndroidDeviceStatesEveryKey"
	unitInvBudget        = "internal/resources.TestInventoryAnswersAtTheBudgetAndTheRetryIsComplete"
	unitInvFailures      = "internal/resources.TestInventoryReportsFailuresAndSupersededReads"
	unitInvRetry         = "internal/resources.TestInventoryRetryOfAnOvertakenListingIsSuperseded"
	unitTuningOff        = "internal/daemon.TestResourceTuningIsOffByDefault"
	unitLeaseTunes       = "internal/daemon.TestLeaseRequestedWithResourcesMayTuneAndIsVerified"
	unitInputValidated   = "internal/daemon.TestResourceInputIsValidated"
	unitUnprovableDaemon = "internal/daemon.TestUnprovableLeaseProfileIsRefusedAndLeavesNoDevice"
	unitAndroidReceipt   = "internal/daemon.TestAndroidLeaseCarriesItsReceiptAndRestores"
	unitNoReconciler     = "internal/daemon.TestReconcileOnADriverWithoutReconcilerIsRefusedBeforeAnyCall"
	unitLiveInventory    = "internal/resources.TestInventoryReadsLiveFactsOfRunningDevicesOnly"

	unitSharedLate     = "internal/drivers/listcache.TestSharedAnswersWithinBudgetAndServesTheLateRead"
	unitSharedBurst    = "internal/drivers/listcache.TestSharedBurstStartsOneRead"
	unitSharedNoFailed = "internal/drivers/listcache.TestSharedKeepsNoFailedOrPartialRead"
	unitSharedInval    = "internal/drivers/listcache.TestSharedInvalidateSupersedesTheReadInFlight"
	unitSharedCap      = "internal/drivers/listcache.TestSharedCapsTheBackgroundRead"
	unitSharedRetry    = "internal/drivers/listcache.TestSharedRetryAfterAnOvertakenReadIsSuperseded"
	unitSharedLifetime = "internal/drivers/listcache.TestSharedLifetimeEndSupersedesTheReadInFlight"
	unitTicket         = "internal/drivers/listcache.TestFetchNeverUsesAReadThatStartedBeforeItsTicket"
	unitGiveUp         = "internal/drivers/listcache.TestACallerThatGivesUpDoesNotFailTheOthers"

	unitAndroidFacts    = "internal/drivers/android.TestFactsFromCapturedConfigINI"
	unitWindowCaptures  = "internal/drivers/android.TestParseDumpsysWindowCaptures"
	unitWindowUnknowns  = "internal/drivers/android.TestParseDumpsysWindowUnknowns"
	unitAndroidProvFact = "internal/drivers/android.TestProvisionStatesTheAVDsFacts"
	unitAndroidForm     = "internal/drivers/android.TestFormFactorFromTheAVDProfile"
	unitAndroidWhole    = "internal/drivers/android.TestGroupStateNeedsTheWholeGroup"
	unitHardwareSpec    = "internal/drivers/android.TestWithHardwareDistinguishesAndPricesTheSpec"
	unitHardwareINI     = "internal/drivers/android.TestWriteHardwareKeepsTheRestOfConfigINI"
	unitIOSForm         = "internal/drivers/ios.TestFormFactorFromProductFamily"
	unitIOSProvFacts    = "internal/drivers/ios.TestProvisionStatesFactsFromTheKeptListing"
	unitIOSRetryRead    = "internal/drivers/ios.TestRetryReadRetriesTwiceWithBackoff"
	unitIOSWriteOnce    = "internal/drivers/ios.TestResourceWriteIsNeverRetried"
	unitIOSEvidence     = "internal/drivers/ios.TestLabelStateEvidence"
	unitIOSDisjoint     = "internal/drivers/ios.TestResourceCatalogueIsDisjointAndKnown"
	simIOSIndependent   = "internal/simsdk.TestIOSResourcesDisableIsProvenByAnIndependentRead"
	simIOSMissingLabel  = "internal/simsdk.TestIOSResourcesMissingLabelMakesItsGroupUnsupportedWithoutWrites"
	simIOSRuntimeLabels = "internal/simsdk.TestIOSResourcesFollowTheBootedRuntimesCatalogue"
	simIOSNoStick       = "internal/simsdk.TestIOSResourcesWriteThatDoesNotStickIsUnknown"
	simIOSReconcile     = "internal/simsdk.TestIOSResourcesReconcileDriftRepairAndRelease"
	simIOSErase         = "internal/simsdk.TestIOSResourcesEraseClearsOverrides"
	simIOSDeadline      = "internal/simsdk.TestIOSResourcesSlowProbeIsBoundedByTheDeadline"
	simIOSRecord        = "internal/simsdk.TestIOSResourcesRecordForgetsDeletedDevices"
	simAndroid          = "internal/simsdk.TestAndroidResourcesAgainstTheSimulatedSDK"
	simAndroidAudio     = "internal/simsdk.TestAndroidAudioFlagAndGPUModeAgainstTheSimulatedSDK"
	simAndroidLive      = "internal/simsdk.TestAndroidLiveStateAgainstTheSimulatedSDK"

	unitCoreIndependent  = "internal/core.TestResourceSetIsVerifiedByAnIndependentRead"
	unitCoreSerializes   = "internal/core.TestResourceCallSerializesWithTheReclaim"
	unitCoreUnprovable   = "internal/core.TestUnprovableIOSProfileFailsAndDestroysTheCreatedDevice"
	unitCoreAndroidGrant = "internal/core.TestAndroidProfileIsGrantedWithTheResult"
	unitCoreWarmKeys     = "internal/core.TestProfileKeysKeepWarmDevicesApart"
	unitCoreReusedPurge  = "internal/core.TestUnprovableProfileOnAReusedDevicePurgesIt"
	unitCoreNoPort       = "internal/core.TestDriverWithoutThePortAnswersUnsupported"
	unitCoreKeyWhenSet   = "internal/core.TestProfileIsPartOfTheKeyOnlyWhenSet"
	unitCoreStepBounded  = "internal/core.TestLeaseResourceStepIsBoundedOnTheClock"

	unitCLIGroups   = "internal/cli.TestResourcesGroupsNeedsNoDaemon"
	unitCLIInput    = "internal/cli.TestResourcesCommandsCheckInputAndNeverLaunch"
	unitCLIHardware = "internal/cli.TestParseHardware"
	unitMCPOptIn    = "internal/transport/mcp.TestResourceWriteToolsAreOptIn"
	unitMCPConfined = "internal/transport/mcp.TestResourceToolsAreConfinedToTheSessionsLease"
)

// ADRs this registry names.
const (
	adrOneDescription = "0039" // one description; inventory reads within budgets, facts stated at creation
	adrLaunchdLabels  = "0036" // iOS groups are fixed launchd labels proven by two reads
	adrResourceStep   = "0038" // the resource step is its own device operation
	adrNoAutoMobile   = "0085" // AutoMobile machinery simlock does not have
	adrAndroidGranted = "0086" // an Android lease profile is granted with its evidence
)

// The catalogue's tests: the contract holds the reference's lists, and
// each driver maps every group of its platform to commands the simulated
// SDK accepts (ADR 0089).
const (
	unitCatalogueIsReference = "contract.TestResourceCatalogueIsTheReferenceList"
	unitCatalogueAccepted    = "contract.TestEveryReferenceGroupIsAcceptedOnItsPlatformOnly"
	unitIOSControlled        = "internal/drivers/ios.TestEveryIOSGroupButTheSharedOnesIsControlled"
	unitAndroidControlled    = "internal/drivers/android.TestEveryAndroidGroupIsControlledOrNamedUncontrolled"
	unitAndroidCoreAlone     = "internal/drivers/android.TestAndroidPackageGroupsLeaveTheCoreAlone"
	simIOSEveryGroup         = "internal/simsdk.TestIOSEveryControlledGroupAgainstTheSimulatedRuntime"
	simIOSNoIntelligence     = "internal/simsdk.TestIOSAppleIntelligenceIsUnsupportedOnARuntimeWithoutIt"
	simAndroidEveryGroup     = "internal/simsdk.TestAndroidEveryPackageGroupAgainstTheSimulatedSDK"
)

var statements = []conformance.Statement{
	// 1. Device resources: the description, inventory reads and reports.
	{ID: "resources/1.1", Says: "A device's description puts static facts (OS version, runtime id, form factor) at the top level and live state under `runtime`, with no second name for either.",
		Tests: []string{e2eLiveUnderRuntime, e2eEveryKey}},
	{ID: "resources/1.2", Says: "A fact nobody could establish is an explicit null: the key is always there.",
		Tests: []string{e2eEveryKey, unitDescribeIOS, unitDescribeAndroid}},
	{ID: "resources/1.3", Says: "A booted virtual device keeps the facts of its configured image: display, device type, runtime id and, on Android, the image's path, target and origin.",
		Tests: []string{e2eEveryKey, unitAndroidFacts, unitAndroidProvFact, unitIOSProvFacts},
		Note:  "simctl reports no screens, so an iOS display is null; the facts are stated when the driver makes the device (ADR 0039)."},
	{ID: "resources/1.4", Says: "The retained configured facts include a capability inventory.", ADR: adrNoAutoMobile,
		Note: "simlock installs no automation service and states no capability inventory."},
	{ID: "resources/1.5", Says: "Where no configured-image provenance exists, image-only facts stay null.",
		Tests: []string{e2eEveryKey},
		Note:  "simlock leases no physical devices; an iOS simulator has no image, and its `image` is null."},
	{ID: "resources/1.6", Says: "On Android, `runtime.locked` comes from the keyguard probe.",
		Tests: []string{unitWindowCaptures, unitLiveInventory, simAndroidLive},
		Note:  "The probe is `adb shell dumpsys window`, read with the device listing: locked is whether the lock screen shows, null when the dump does not say or its readings disagree (ADR 0090)."},
	{ID: "resources/1.7", Says: "On Android, `runtime.orientation` is read from the screen's current rotation, within a time bound.",
		Tests: []string{unitWindowCaptures, unitWindowUnknowns, unitLiveInventory, simAndroidLive},
		Note:  "portrait or landscape: display 0's rotation applied to its natural size, cross-checked with its current size; the same dump, bounded at 2 s per device, and a probe that fails or times out leaves the facts null (ADR 0090)."},
	{ID: "resources/1.8", Says: "Without a safe way to read them (on iOS today), `locked` and `orientation` are null.",
		Tests: []string{e2eEveryKey}},
	{ID: "resources/1.9", Says: "Read-only inventory shares one successful probe per stage for a short time (2.5 s), and callers arriving meanwhile join it.",
		Tests: []string{unitSharedBurst, unitSharedLate, e2eSlowProbe},
		Note:  "The shared read is a platform's whole device listing or catalog; no per-device name or display probe is cached (ADR 0039 §3, §5)."},
	{ID: "resources/1.10", Says: "A fresh listing or a new emulator incarnation never reuses an older read, and failed reads are not kept.",
		Tests: []string{unitTicket, unitSharedNoFailed, unitInvFailures}},
	{ID: "resources/1.11", Says: "Each inventory read has its own response budget: 2 s for the device list, 8 s for the booted view, 9 s for the catalog.",
		Tests: []string{e2eSlowProbe}},
	{ID: "resources/1.12", Says: "When a budget runs out, the answer keeps what is known and adds an incomplete enrichment (pending stages, retryable, retryAfterMs 1000, a reason) that is never cached.",
		Tests: []string{e2eSlowProbe, unitInvBudget, unitSharedNoFailed}},
	{ID: "resources/1.13", Says: "The device list's configured-image fallback, when it times out or fails, is reported missing as configuredImages.", ADR: adrOneDescription,
		Note: "There is no fallback stage: image facts are stated when the device is made and stored on its record, so a listing never waits for them."},
	{ID: "resources/1.14", Says: "An incomplete image catalog says so, with a timeout error carrying retry hints and the missing stages.",
		ADR: adrOneDescription, Tests: []string{unitSharedLate, unitSharedCap},
		Note: "The catalog is one more shared read (ADR 0039 §3): `simlock catalog` reports an unfinished platform catalog under the same `enrichment` as the list (pending `<platform>.catalog`, code, retryAfterMs 1000), not as catalogComplete/catalogObservations."},
	{ID: "resources/1.15", Says: "The slow read continues in the background up to a 30 s cap, and its finished result serves a retry for 2.5 s without starting new processes.",
		Tests: []string{unitSharedCap, unitSharedLate, e2eSlowProbe}},
	{ID: "resources/1.16", Says: "Image provenance is fetched once and shared, with a short wait for callers, success kept until the AVD changes and failures cooled down.", ADR: adrOneDescription,
		Note: "No provenance fetch: the AVD's image facts are read from its config.ini when the driver creates it."},
	{ID: "resources/1.17", Says: "Invalidation and daemon shutdown abort shared reads, while one caller giving up abandons only its own wait.",
		Tests: []string{unitSharedInval, unitSharedLifetime, unitGiveUp}},
	{ID: "resources/1.18", Says: "An observed `runtime.serviceStatus` holds the whole diagnostic of the on-device service.", ADR: adrNoAutoMobile,
		Note: "simlock runs no on-device service, so there is no serviceStatus."},
	{ID: "resources/1.19", Says: "The top-level form factor is always one of phone, tablet, foldable or unknown.",
		Tests: []string{unitAndroidForm, unitIOSForm, e2eEveryKey}},
	{ID: "resources/1.20", Says: "A device's resource report is an object keyed by logical group name, and names its platform as android or ios."},
	{ID: "resources/1.21", Says: "Platform reports are their own types, and consumers narrow over their union rather than the generic base.", ADR: adrNoAutoMobile,
		Note: "One Go contract type (`ResourceResult`) whose `platform` field and catalogue say which groups it holds (ADR 0032)."},
	{ID: "resources/1.22", Says: "A requested configuration is never taken for observed state: writes answer with evidence from a read.",
		Tests: []string{simIOSIndependent, simIOSNoStick, unitCoreIndependent}},

	// 2. Resource groups.
	{ID: "resources/2.1", Says: "Six groups exist on both platforms; googlePlayServices is Android's alone, icloudSync and photoAnalysis iOS's alone."},
	{ID: "resources/2.2", Says: "Groups are distinct functions: changing one proves nothing about another, and native service names never leave the platform code.",
		Tests: []string{unitIOSDisjoint, unitInputValidated}},

	// 3. Observed state.
	{ID: "resources/3.1", Says: "A platform snapshot holds every core key even where a service is missing; having a key does not mean it is supported."},
	{ID: "resources/3.2", Says: "A group reads enabled, disabled, unsupported or unknown, and the last two may say why.",
		Tests: []string{unitIOSEvidence}},
	{ID: "resources/3.3", Says: "Enabled or disabled needs evidence for the whole group; partial or mixed evidence is unknown.",
		Tests: []string{unitAndroidWhole, unitIOSEvidence, simIOSReconcile}},
	{ID: "resources/3.4", Says: "There are no named profiles: a workload profile is the requested map, known by the fingerprint of its content.",
		Tests: []string{unitInputValidated, unitCoreKeyWhenSet, unitCoreWarmKeys}},

	// 4. Runtime producers.
	{ID: "resources/4.1", Says: "Observation only reads: it writes nothing, makes no restore receipt and never looks at what was requested.",
		Tests: []string{unitTuningOff}},
	{ID: "resources/4.2", Says: "Mixed or partly missing evidence is unknown, a group with no read path at all is unsupported, and a failed native read is unknown.",
		Tests: []string{simIOSMissingLabel, unitIOSEvidence, simIOSNoStick}},
	{ID: "resources/4.3", Says: "A device with no resource control answers a complete snapshot of unsupported groups, with reasons.",
		Tests: []string{unitCoreNoPort, unitMCPConfined},
		Note:  "simlock leases no physical devices; a driver without the resource port is the case that answers this way."},
	{ID: "resources/4.4", Says: "Requested-versus-observed drift comes only from an iOS reconcile; listings and MCP device resources do not carry it.",
		Tests: []string{simIOSReconcile},
		Note:  "The suite checks `simlock list --json`; MCP `list_devices` answers the same description (ADR 0039 §1)."},

	// 5. Configuring resources.
	{ID: "resources/5.1", Says: "Writing resources is off by default and turned on by an exact tool name at start.",
		Tests: []string{unitMCPOptIn, unitTuningOff},
		Note:  "`simlock mcp --enable-tool set_device_resources`, or `resources.enabled` in the config; otherwise `RESOURCES_NOT_ENABLED`."},
	{ID: "resources/5.2", Says: "The write tool can also be switched on during an MCP session.", ADR: adrNoAutoMobile,
		Note: "No run-time tool toggle; tools are enabled when `simlock mcp` starts."},
	{ID: "resources/5.3", Says: "Asking for resources at provisioning time needs no enabling of the standalone tool.",
		Tests: []string{unitLeaseTunes},
		Note:  "The provisioning call is `lease --resources` (`lease.request` with `resources`)."},
	{ID: "resources/5.4", Says: "Requests take a partial group-to-state map; unnamed groups are left alone, and an empty map, native names, keys outside the catalogue and named profiles are refused.",
		Tests: []string{unitInputValidated, simIOSIndependent, unitCLIInput}},
	{ID: "resources/5.5", Says: "A provisioning-time profile is applied after boot and before the device is handed over, and applied afresh on every provisioning.",
		Tests: []string{unitCoreWarmKeys, unitLeaseTunes},
		Note:  "Applied between ready and granted, and again whenever a warm device is reused (ADR 0038)."},
	{ID: "resources/5.6", Says: "A resource write's deadline defaults to five minutes.",
		Tests: []string{unitCoreStepBounded},
		Note:  "The lease-time step's bound (`core.TuneTimeout`) is checked; the daemon's default for `resources set --timeout-ms` (300000) is the same constant's value but is not asserted by a test."},
	{ID: "resources/5.7", Says: "Inside a provisioning deadline, the resource step leaves time for automation readiness and session binding.", ADR: adrNoAutoMobile,
		Note: "Nothing follows the resource step but the grant, so nothing is reserved; the step is bounded on its own clock."},
	{ID: "resources/5.8", Says: "iOS groups are narrow and disjoint: wallpaper, widgets and Live Activities each have their own switch, and nothing starts off.",
		Tests: []string{unitIOSDisjoint, simIOSIndependent, e2eIOSDisabled}},
	{ID: "resources/5.9", Says: "The iOS controls cover the reference's full list of service groups (family, Screen Time, App Store, mail and calendar, Safari, messaging, companion devices, Wallet and the rest).",
		Tests: []string{unitCatalogueIsReference, unitCatalogueAccepted, unitIOSControlled, simIOSEveryGroup, simIOSNoIntelligence},
		Note:  "Every group of the list is a set of launchd labels (ADR 0089); a runtime that ships none of a group's jobs reports it unsupported. Slim mode's default set is unchanged."},
	{ID: "resources/5.10", Says: "Callers cannot pass launchd labels, shell commands or service paths.",
		Tests: []string{unitInputValidated}},
	{ID: "resources/5.11", Says: "Each group is checked against the booted runtime before any write; a missing label is reported and left out, and a group with none is unsupported.",
		Tests: []string{simIOSMissingLabel, simIOSRuntimeLabels}},
	{ID: "resources/5.12", Says: "A mismatched, default-off or conditional service definition makes its whole group unsupported, untouched.", ADR: adrLaunchdLabels,
		Note: "A label counts as present when launchd has it loaded or holds an override; the job's plist is not inspected."},
	{ID: "resources/5.13", Says: "A failed native read is unknown, never proof that a service is absent.",
		Tests: []string{unitIOSEvidence}},
	{ID: "resources/5.14", Says: "A change writes the launchd override and unloads or reloads the job without a reboot, then re-reads both.",
		Tests: []string{simIOSIndependent, e2eIOSDisabled}},
	{ID: "resources/5.15", Says: "No service belongs to two groups, so turning one on cannot quietly turn on another.",
		Tests: []string{unitIOSDisjoint}},
	{ID: "resources/5.16", Says: "Every native command is an argv call bounded by the request's deadline and by 30 s.",
		Tests: []string{simIOSDeadline}},
	{ID: "resources/5.17", Says: "Idempotent reads are retried at most twice (100 ms, then 400 ms); writes are never retried.",
		Tests: []string{unitIOSRetryRead, unitIOSWriteOnce}},
	{ID: "resources/5.18", Says: "Resource calls serialize with the device's boot, shutdown and teardown, and only the holder of the device may make them.",
		Tests: []string{unitCoreSerializes, unitMCPConfined, unitLeaseTunes}},
	{ID: "resources/5.19", Says: "On iOS, backgroundSync and icloudSync stay unsupported, and one request can apply what is supported while reporting the rest as unsupported.",
		Tests: []string{simIOSIndependent, simIOSMissingLabel}},
	{ID: "resources/5.20", Says: "After a write, the answer also carries an independent snapshot of every group of the platform, asked for or not.",
		Tests: []string{simIOSIndependent}},
	{ID: "resources/5.21", Says: "A snapshot that sees a requested group in the opposite state fails the call and lists it under observationContradictions.",
		Tests: []string{"test/e2e.TestConfResMCPUnprovenSetIsAToolErrorWithItsEvidence"},
		Note:  "A write the SDK acknowledges but does not apply (the launchctl-write-noop fault) is seen enabled by the snapshot."},
	{ID: "resources/5.22", Says: "A result has the request, the observed group states, per-service evidence, the groups written, `verification: current_boot`, and is a success only if every entry matched.",
		Tests: []string{simIOSIndependent, simIOSMissingLabel}},
	{ID: "resources/5.23", Says: "Failed or incomplete evidence is unknown, never a guess; a group succeeds only when every installed service matches, and absent services show as unsupported.",
		Tests: []string{simIOSNoStick, simIOSMissingLabel}},
	{ID: "resources/5.24", Says: "An incomplete answer to the MCP write tool is a tool error that still carries the evidence.",
		Tests: []string{"test/e2e.TestConfResMCPUnprovenSetIsAToolErrorWithItsEvidence"},
		Note:  "RESOURCE_PROFILE_UNPROVEN with the whole answer under details.result and the unproven groups under details.unproven; the CLI exits 1 after printing it."},
	{ID: "resources/5.25", Says: "On an iOS simulator a provisioning-time profile is all or nothing: an unproven entry fails it, not retryable, with the drift in details, and a device made for it is removed.",
		Tests: []string{e2eUnprovableProfile, unitUnprovableDaemon, unitCoreUnprovable},
		Note:  "The code is RESOURCE_PROFILE_UNPROVEN, with `details.resourceDrift`."},
	{ID: "resources/5.26", Says: "On an adopted simulator, overrides already written by a failed provisioning stay in place.", ADR: adrResourceStep,
		Note: "A device that existed before the request is purged instead, so nobody else gets it half-tuned (TestUnprovableProfileOnAReusedDevicePurgesIt)."},
	{ID: "resources/5.27", Says: "On Android, a provisioning-time profile returns its result and keeps the device and its session, marked as an error.", ADR: adrAndroidGranted,
		Tests: []string{unitCoreAndroidGrant, unitCoreReusedPurge},
		Note:  "The lease is granted with the full result and `success: false`; an error answer would leave a lease its requester does not know of."},
	{ID: "resources/5.28", Says: "A booted provisioning answer gives its session id at the top level as sessionId, with no alias, and an unbooted one names none.", ADR: adrNoAutoMobile,
		Note: "The grant names its lease (`leaseId`); a lease is always of a booted device."},

	// 6. Reconciling workload profiles.
	{ID: "resources/6.1", Says: "After a proven write, the services simlock itself turned off are recorded per simulator incarnation (UDID, runtime and device type), and turning one back on drops it.",
		Tests: []string{simIOSRecord, simIOSReconcile}},
	{ID: "resources/6.2", Says: "Reconcile is opt-in in the same way as writes.",
		Tests: []string{unitTuningOff, unitMCPOptIn}},
	{ID: "resources/6.3", Says: "Drift is typed: missingRequested, ownedExtra, unsupported and commandFailure.",
		Tests: []string{simIOSReconcile}},
	{ID: "resources/6.4", Says: "By default reconcile only reports; repair re-applies just the drifted entries and reads again, releasing owned extras is its own switch, and a run without drift issues no command.",
		Tests: []string{simIOSReconcile}},
	{ID: "resources/6.5", Says: "Reconcile succeeds only if its final read proves each entry asked for and leaves no owned extra, so an unsupported entry fails it.",
		Tests: []string{simIOSReconcile}},
	{ID: "resources/6.6", Says: "After an erase, the entries asked for read missingRequested, the recorded overrides are forgotten rather than counted as extras, and a repair writes them again.",
		Tests: []string{simIOSErase}},
	{ID: "resources/6.7", Says: "A recreated simulator or a new runtime is a new incarnation with no record.",
		Tests: []string{simIOSRecord}},
	{ID: "resources/6.8", Says: "Reconcile on an Android target (or a physical or unbooted device) is refused before any command runs.",
		Tests: []string{e2eAndroidReconcile, unitNoReconciler},
		Note:  "UNSUPPORTED_PLATFORM; simlock leases no physical devices, and a leased simulator is always booted."},
	{ID: "resources/6.9", Says: "Writes made by a provisioning-time profile are recorded too, so a later reconcile knows them."},

	// 7. Automation capabilities.
	{ID: "resources/7.1", Says: "Resource state says nothing about automation capabilities, which are reported on their own.", ADR: adrNoAutoMobile,
		Note: "simlock reports no automation capabilities, so none is ever derived from a resource state."},

	// 8. Android controls.
	{ID: "resources/8.1", Says: "Android controls are opt-in and separate; an optional-app group disables only installed system packages of a fixed list, for the current user.",
		Tests: []string{simAndroid}},
	{ID: "resources/8.2", Says: "Packages holding a default role, the current input method and active accessibility services stay enabled, and without role inspection no package is disabled while settings still apply.",
		Tests: []string{simAndroid, simAndroidEveryGroup}},
	{ID: "resources/8.3", Says: "The animations group puts the window, transition and animator scales all at 0 (off) or all at 1 (on).",
		Tests: []string{e2eAndroidReceipt, simAndroid}},
	{ID: "resources/8.4", Says: "screensavers controls dream activation on its own, and backup controls the current user's Backup Manager.",
		Tests: []string{simAndroid}},
	{ID: "resources/8.5", Says: "The Android controls cover the reference's full list of optional apps and feature tradeoffs (contacts, video, assistant, Digital Wellbeing, Health Connect, ad services and the rest).",
		Tests: []string{unitCatalogueIsReference, unitCatalogueAccepted, unitAndroidControlled, unitAndroidCoreAlone, simAndroidEveryGroup},
		Note:  "Each app group names its Google and AOSP package ids (ADR 0089); googleServicesFramework is its own group, apart from googlePlayServices."},
	{ID: "resources/8.6", Says: "A restore receipt, passed back without resources, puts back exactly the prior values.",
		Tests: []string{e2eAndroidReceipt, unitAndroidReceipt, simAndroid}},
	{ID: "resources/8.7", Says: "A receipt applies only to the emulator serial, boot and user that issued it.",
		Tests: []string{e2eAndroidReceipt, unitAndroidReceipt, simAndroid},
		Note:  "Stricter: it is also bound to the device incarnation, which a snapshot load renews (ADR 0037)."},
	{ID: "resources/8.8", Says: "Receipts keep default package states and absent settings, and a restore may succeed while the group then reads unknown.",
		Tests: []string{simAndroid}},
	{ID: "resources/8.9", Says: "changed lists the groups a native write was tried for, and each is read back.",
		Tests: []string{simAndroid}},

	// 9. Android provisioning hardware.
	{ID: "resources/9.1", Says: "Requested hardware (memory, CPU cores, GPU mode, screen, cameras, audio) is written into the AVD's configuration before it boots.",
		Tests: []string{simAndroid, unitHardwareINI}},
	{ID: "resources/9.2", Says: "GPU modes and camera values come from closed lists, and anything else is refused.",
		Tests: []string{unitInputValidated, unitCLIHardware, simAndroidAudio}},
	{ID: "resources/9.3", Says: "A running device whose hardware differs from the request is never taken for it.",
		Tests: []string{unitHardwareSpec, unitCoreWarmKeys},
		Note:  "The hardware is part of the spec's key, so a mismatched device is simply another spec; there is no replay that rewrites a stopped AVD."},
	{ID: "resources/9.4", Says: "Audio is independent of headless launch: turning it off in the environment passes -no-audio, and otherwise the AVD's audio settings apply.",
		Tests: []string{simAndroidAudio, simAndroid},
		Note:  "The variable is SIMLOCK_EMULATOR_AUDIO=false."},
	{ID: "resources/9.5", Says: "A retired emulator transport is fenced by durable tombstones, so it never identifies a later device.", ADR: adrNoAutoMobile,
		Note: "No device-session transport registry; a new emulator is a new device record, and receipts are bound to the incarnation (ADR 0037)."},

	// 10. VM snapshot incarnation lifecycle, and the inventory paragraphs that close the reference.
	{ID: "resources/10.1", Says: "A snapshot restore makes a new incarnation before the guest is replaced, so what was bound to the old one no longer applies.",
		Tests: []string{e2eAndroidReceipt, simAndroid},
		Note:  "The driver's incarnation token is renewed before every snapshot load (ADR 0037)."},
	{ID: "resources/10.2", Says: "A restore retires the device-session id with a successor, ended and started frames and bounded tombstones.", ADR: adrNoAutoMobile,
		Note: "No device-session ids or event-stream epochs."},
	{ID: "resources/10.3", Says: "Per-device host-state owners are told before and after a restore, and installed-app owners notify only once the guest is ready.", ADR: adrNoAutoMobile,
		Note: "No per-device caches to invalidate (ADR 0039 §5) and no installed-app notifications."},
	{ID: "resources/10.4", Says: "A restore fences new recordings of the device until it settles.", ADR: adrNoAutoMobile,
		Note: "simlock starts no recordings."},
	{ID: "resources/10.5", Says: "A lasting provenance failure is reported as a non-retryable missing provenance, and the list stays usable.", ADR: adrOneDescription,
		Note: "No provenance read exists to fail (resources/1.16)."},
	{ID: "resources/10.6", Says: "Device and image changes and daemon shutdown invalidate fully: obsolete reads answer superseded with retry hints, not timeout.",
		Tests: []string{e2eOvertaken, e2eOvertakenRetry, unitInvRetry, unitSharedRetry, unitSharedLifetime}},
	{ID: "resources/10.7", Says: "Only a hit of the background cap is a background timeout; a genuine failure answers failed with its cause.",
		Tests: []string{unitSharedCap, unitInvFailures}},
	{ID: "resources/10.8", Says: "Presence and lifecycle notifications clear the short caches without aborting shared fetches.", ADR: adrOneDescription,
		Note: "One kind of invalidation: every device fact drops its platform's listing and aborts the read in flight (ADR 0039 §4)."},
	{ID: "resources/10.9", Says: "Device-list callers wait their own budget and get a retryable timeout with retryAfterMs 1000, while the shared read goes on and fills the cache.",
		Tests: []string{e2eSlowProbe, unitSharedLate, unitGiveUp}},
	{ID: "resources/10.10", Says: "Device-list subprocesses share a 10 s bound and a 5 s cache, bypass readers run fresh, and AVD listings share a 30 s cap.", ADR: adrOneDescription,
		Note: "One cap for every shared read (`inventory.backgroundCapMs`, 30 s) and a 2.5 s result TTL; there are no bypass readers."},
}
