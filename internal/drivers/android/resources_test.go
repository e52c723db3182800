package android

import (
	"slices"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
)

// androidUncontrolled are the common groups an emulator has no control for:
// they are known names, observed unsupported with a reason, and never
// written (ADR 0089).
var androidUncontrolled = []string{"backgroundSync", "searchIndexing", "wallpaperRendering", "widgets", "liveActivities"}

// Every Android group of the contract is in the driver's catalogue, except
// the common groups the emulator cannot control; the catalogue holds no
// group the contract does not give Android.
func TestEveryAndroidGroupIsControlledOrNamedUncontrolled(t *testing.T) {
	cat := androidResourceCatalogue()
	for _, g := range contract.ResourceGroupsFor(Platform) {
		_, mapped := cat[g]
		if mapped == slices.Contains(androidUncontrolled, g) {
			t.Errorf("%s: in the catalogue %v, uncontrolled %v; want exactly one", g, mapped, !mapped)
		}
	}
	for g, rg := range cat {
		if grp, ok := contract.LookupResourceGroup(g); !ok || !slices.Contains(grp.Platforms, Platform) {
			t.Errorf("%s is not an Android group of the contract", g)
		}
		if len(rg.settings) == 0 && !rg.backup && len(rg.packages) == 0 {
			t.Errorf("%s controls nothing", g)
		}
	}
}

// No native service is in two groups, so enabling one group never turns
// another back on, and the restore path can name each service's group.
func TestAndroidGroupsShareNoService(t *testing.T) {
	seen := map[string]string{}
	for g, rg := range androidResourceCatalogue() {
		var svcs []string
		for _, s := range rg.settings {
			svcs = append(svcs, s.ns+"/"+s.key)
		}
		svcs = append(svcs, rg.packages...)
		for _, s := range svcs {
			if other, dup := seen[s]; dup {
				t.Errorf("%s is in %s and %s", s, other, g)
			}
			seen[s] = g
		}
	}
	groupOf := serviceGroups()
	for s, g := range seen {
		if groupOf[s] != g {
			t.Errorf("serviceGroups()[%s] = %q, want %q", s, groupOf[s], g)
		}
	}
}

// Package groups never list what the emulator needs to run or to be
// automated: the providers, SystemUI, launchers, keyboards, settings, the
// shell, the permission and package machinery, networking, WebView, and
// no Mainline APEX container (only the app a module carries).
func TestAndroidPackageGroupsLeaveTheCoreAlone(t *testing.T) {
	core := []string{"android", "com.android.systemui", "com.android.settings", "com.android.shell", "com.android.phone",
		"com.android.providers.contacts", "com.android.providers.calendar", "com.android.providers.media",
		"com.android.documentsui", "com.android.launcher3", "com.google.android.apps.nexuslauncher",
		"com.android.inputmethod.latin", "com.google.android.inputmethod.latin",
		"com.android.permissioncontroller", "com.google.android.permissioncontroller",
		"com.android.packageinstaller", "com.google.android.packageinstaller",
		"com.android.networkstack", "com.google.android.networkstack", "com.android.webview", "com.google.android.webview",
		"com.android.chrome", "com.android.wallpaperbackup", "com.android.credentialmanager"}
	apex := []string{"com.android.healthfitness", "com.google.android.healthfitness", "com.android.adservices",
		"com.google.android.adservices", "com.android.ondevicepersonalization", "com.google.android.ondevicepersonalization"}
	for g, rg := range androidResourceCatalogue() {
		for _, p := range rg.packages {
			if slices.Contains(core, p) || slices.Contains(apex, p) {
				t.Errorf("%s lists %s", g, p)
			}
			if strings.HasPrefix(p, "com.android.providers.") {
				t.Errorf("%s lists the provider %s", g, p)
			}
		}
	}
	// The two Google infrastructure groups are split: Play services and
	// the Services Framework are separate tradeoffs.
	if p := ResourcePackages("googlePlayServices"); !slices.Equal(p, []string{"com.google.android.gms"}) {
		t.Errorf("googlePlayServices %v", p)
	}
	if p := ResourcePackages("googleServicesFramework"); !slices.Equal(p, []string{"com.google.android.gsf"}) {
		t.Errorf("googleServicesFramework %v", p)
	}
}
