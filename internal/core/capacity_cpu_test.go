package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports/fake"
)

// cpuCharged is a scripted driver that also says its CPU footprint.
type cpuCharged struct {
	*fakedrv.Driver
	milli uint64
}

func (d cpuCharged) CPUMilliPerDevice() uint64 { return d.milli }

// The resource strategy charges every running device its own CPU share
// against one CPU budget, as it charges RAM: on a 16 GiB, 8-core machine,
// stock simulators (2 CPUs, 2 GiB) are admitted 4 at a time, slim ones (the
// iOS driver's slim charge, about 1.2 CPUs and 440 MiB) 6, where a fixed
// share of 2 CPUs per device stopped both at 4. An emulator on the same
// budget takes its own 2 CPUs from the simulators.
func TestSlimDevicesAreChargedTheirCPUShare(t *testing.T) {
	admit := func(iosMilli, iosRAM uint64, emulators int) (int, core.CapacityReport) {
		h := newHarness(t, core.Limits{})
		h.drv.RAM, h.droid.RAM = iosRAM, 4<<30
		ios := cpuCharged{Driver: h.drv, milli: iosMilli}
		droid := cpuCharged{Driver: h.droid, milli: 2000}
		stats := &fake.Stats{CPUs: 8, TotalRAM: 16 << 30}
		drivers := []core.Driver{ios, droid}
		h.engine = core.New(h.cfg, core.Deps{Clock: h.clock, Store: newMemStore(), Drivers: drivers,
			Strategy: core.ResourceStrategy{Stats: stats, Drivers: drivers}, Bus: h.bus})
		if err := h.engine.Converge(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i := range emulators {
			leaseOn(t, h, fmt.Sprintf("a%d", i), "android", "Pixel")
		}
		n := 0
		for ; n < 32; n++ {
			who := fmt.Sprintf("i%d", n)
			_, err := h.engine.Request(context.Background(), core.Request{Spec: core.SpecRequest{Platform: "ios"},
				RequesterID: who, OwnerID: who, NoWait: true}, nil)
			if errors.Is(err, core.ErrNoCapacity) {
				break
			}
			if err != nil {
				t.Fatalf("iOS lease %d: %v", n, err)
			}
		}
		return n, h.engine.Capacity()
	}
	stock, c := admit(2000, 2<<30, 0)
	if stock != 4 || c.Limits.CPUBudget != 8000 || c.Limits.CPUPerDevice["ios"] != 2000 {
		t.Fatalf("stock: %d admitted, limits %+v; want 4 against 8000 thousandths of a CPU", stock, c.Limits)
	}
	slim, _ := admit(1213, 440<<20, 0)
	if slim != 6 {
		t.Fatalf("slim: %d admitted on 8 cores, want 6 (8000 / 1213)", slim)
	}
	mixed, _ := admit(1213, 440<<20, 1)
	if mixed != 4 {
		t.Fatalf("slim next to an emulator: %d admitted, want 4 ((8000 - 2000) / 1213)", mixed)
	}
}
