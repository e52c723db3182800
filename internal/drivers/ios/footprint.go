package ios

import "github.com/simlock/simlock/internal/core"

var (
	_ core.Footprinter    = (*Driver)(nil)
	_ core.CPUFootprinter = (*Driver)(nil)
)

// stockRAMPerDevice is what one booted stock simulator is charged: its
// processes settle around 1.5 GiB; 2 GiB leaves room for the app under
// test.
const stockRAMPerDevice uint64 = 2 << 30

// stockCPUMilliPerDevice is one booted stock simulator's CPU charge, in
// thousandths of a CPU: the resource strategy's default of two CPUs.
const stockCPUMilliPerDevice uint64 = 2000

// RAMPerDevice is what one booted simulator costs, for the resource
// capacity strategy. In slim mode every device is proven slim before it is
// ready, so it is charged the stock figure scaled by what the disabled
// jobs cost (slim.go).
func (d *Driver) RAMPerDevice() uint64 { return d.res.slim.footprint(stockRAMPerDevice) }

// CPUMilliPerDevice is the CPU share one booted simulator is charged, for
// the same strategy, consistent with RAMPerDevice (slim.go's cpuFootprint).
func (d *Driver) CPUMilliPerDevice() uint64 { return d.res.slim.cpuFootprint(stockCPUMilliPerDevice) }
