package ios

// RAMPerDevice is what one booted simulator costs, for the resource
// capacity strategy: a simulator's processes settle around 1.5 GiB; 2 GiB
// leaves room for the app under test.
func (d *Driver) RAMPerDevice() uint64 { return 2 << 30 }
