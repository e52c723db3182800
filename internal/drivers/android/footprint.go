package android

// RAMPerDevice is what one running emulator costs, for the resource
// capacity strategy: the guest's RAM (2-4 GiB by profile) plus the QEMU
// process around it. RAM is the binding constraint for emulators.
func (d *Driver) RAMPerDevice() uint64 { return 4 << 30 }
