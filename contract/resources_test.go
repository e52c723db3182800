package contract

import (
	"slices"
	"testing"
)

// The group names the device-resources reference gives, platform by
// platform, in its order: its group table, then its list of iOS
// service-group controls ("Configuring resources") and of Android controls
// ("Android controls"). Names only: what each covers is in ResourceGroups.
var (
	referenceCommonGroups = []string{"backgroundSync", "searchIndexing", "animations", "wallpaperRendering", "widgets", "liveActivities"}
	referenceIOSGroups    = []string{"icloudSync", "photoAnalysis",
		"healthServices", "homeServices", "fitnessServices", "familyServices", "screenTime",
		"newsServices", "weatherServices", "tipsServices", "gameServices", "mapsSync", "advertising", "diagnosticReporting",
		"assistantSuggestions", "appleIntelligence", "appStoreServices", "appleMediaSync",
		"mailServices", "calendarServices", "reminderServices", "personalDataSync", "safariSync", "icloudSettingsSync",
		"messagingMaintenance", "watchConnectivity", "carPlay", "tvRemote", "findMy", "continuity",
		"walletServices", "businessServices"}
	referenceAndroidGroups = []string{"googlePlayServices", "screensavers", "backup",
		"mailApp", "calendarApp", "contactsApp", "mapsApp", "videoApp", "musicApp", "photosApp", "assistantApp",
		"digitalWellbeing", "printing", "accessibilityApps", "textToSpeech", "wallpaperApps",
		"healthConnect", "adServices", "onDevicePersonalization", "storeApp", "dialerApp", "messagesApp",
		"googleServicesFramework"}
)

// The catalogue is exactly the reference's groups, each on the platforms
// the reference puts it, in the reference's order, once each, and each with
// a description.
func TestResourceCatalogueIsTheReferenceList(t *testing.T) {
	var names []string
	for _, g := range ResourceGroups() {
		names = append(names, g.Name)
		if g.Doc == "" {
			t.Errorf("%s has no description", g.Name)
		}
	}
	want := slices.Concat(referenceCommonGroups, referenceIOSGroups, referenceAndroidGroups)
	if !slices.Equal(names, want) {
		t.Fatalf("catalogue\n %v\nwant\n %v", names, want)
	}
	if got, want := ResourceGroupsFor("ios"), slices.Concat(referenceCommonGroups, referenceIOSGroups); !slices.Equal(got, want) {
		t.Errorf("iOS groups %v, want %v", got, want)
	}
	if got, want := ResourceGroupsFor("android"), slices.Concat(referenceCommonGroups, referenceAndroidGroups); !slices.Equal(got, want) {
		t.Errorf("Android groups %v, want %v", got, want)
	}
}

// Every reference group is a name a request may use on its own platform,
// and a BAD_REQUEST on the other one.
func TestEveryReferenceGroupIsAcceptedOnItsPlatformOnly(t *testing.T) {
	for platform, own := range map[string][]string{"ios": referenceIOSGroups, "android": referenceAndroidGroups} {
		other := map[string]string{"ios": "android", "android": "ios"}[platform]
		for _, g := range slices.Concat(referenceCommonGroups, own) {
			for _, s := range []ResourceState{ResourceEnabled, ResourceDisabled} {
				if err := ValidateResourceRequest(platform, map[string]ResourceState{g: s}); err != nil {
					t.Errorf("%s %s=%s: %v", platform, g, s, err)
				}
			}
		}
		for _, g := range own {
			if err := ValidateResourceRequest(other, map[string]ResourceState{g: ResourceDisabled}); AsError(err) == nil || AsError(err).Code != CodeBadRequest {
				t.Errorf("%s group %s on %s: %v, want BAD_REQUEST", platform, g, other, err)
			}
		}
	}
}
