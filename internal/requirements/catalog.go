package requirements

import "github.com/simlock/simlock/internal/core"

// FromCore is the catalog view of the drivers' catalogs (either may be
// empty: a platform without a driver resolves nothing).
func FromCore(ios, android core.Catalog) Catalog {
	var c Catalog
	for _, m := range ios.Models {
		c.IOS.DeviceTypes = append(c.IOS.DeviceTypes, IOSDeviceType{Name: m.Name, Identifier: m.Identifier, ProductFamily: m.Family, ProductModel: m.ProductModel, MinOS: m.MinOS, MaxOS: m.MaxOS})
	}
	for _, r := range ios.Runtimes {
		c.IOS.Runtimes = append(c.IOS.Runtimes, IOSRuntime{Version: r.Version, Identifier: r.Identifier, Available: r.Available, SupportedTypes: r.SupportedModels})
	}
	for _, m := range android.Models {
		c.Android.Profiles = append(c.Android.Profiles, AndroidProfile{ID: m.Identifier, Name: m.Name})
	}
	for _, r := range android.Runtimes {
		c.Android.Images = append(c.Android.Images, AndroidImage{Release: r.Version, APILevel: r.APILevel, Tag: r.Tag, ABI: r.ABI, Package: r.Identifier, Installed: r.Available})
	}
	return c
}
