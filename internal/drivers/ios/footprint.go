package ios

// stockRAMPerDevice is what one booted stock simulator is charged: its
// processes settle around 1.5 GiB; 2 GiB leaves room for the app under
// test.
const stockRAMPerDevice uint64 = 2 << 30

// RAMPerDevice is what one booted simulator costs, for the resource
// capacity strategy. In slim mode every device is proven slim before it is
// ready, so it is charged the stock figure scaled by what the disabled
// jobs cost (slim.go).
func (d *Driver) RAMPerDevice() uint64 { return d.res.slim.footprint(stockRAMPerDevice) }
