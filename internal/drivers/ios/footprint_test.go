package ios

import "testing"

// A slim simulator is charged less in both RAM and CPU, by the same
// measure (the idle memory of the jobs its groups leave running), and a
// stock one the stock figures.
func TestSlimChargesRAMAndCPUConsistently(t *testing.T) {
	stock := Slim{}
	if got := stock.footprint(stockRAMPerDevice); got != stockRAMPerDevice {
		t.Fatalf("stock RAM %d", got)
	}
	if got := stock.cpuFootprint(stockCPUMilliPerDevice); got != stockCPUMilliPerDevice {
		t.Fatalf("stock CPU %d", got)
	}
	slim, err := Slim{Enabled: true}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	ram, cpu := slim.footprint(stockRAMPerDevice), slim.cpuFootprint(stockCPUMilliPerDevice)
	if ram >= 500<<20 || ram <= 400<<20 {
		t.Fatalf("slim RAM %d MiB, want about 440", ram>>20)
	}
	// Half the stock share is foreground work slim does not remove; the
	// background half shrinks by the same fraction as the RAM.
	want := stockCPUMilliPerDevice/2 + stockCPUMilliPerDevice/2*ram/stockRAMPerDevice
	if cpu < want-1 || cpu > want+1 || cpu >= stockCPUMilliPerDevice*2/3 {
		t.Fatalf("slim CPU %d thousandths, want %d (under two thirds of stock)", cpu, want)
	}
	// Fewer groups off: more charged, never more than stock.
	partial, err := Slim{Enabled: true, Groups: []string{"animations"}}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c := partial.cpuFootprint(stockCPUMilliPerDevice); c <= cpu || c > stockCPUMilliPerDevice {
		t.Fatalf("one group off: %d thousandths, want between %d and %d", c, cpu, stockCPUMilliPerDevice)
	}
}
