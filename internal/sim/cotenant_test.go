package sim

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestCoTenant(t *testing.T) {
	for _, bad := range []string{"4", "x", "1:", "1:5s-2s", "1:-3s", "1:5s-x"} {
		if _, err := NewFleet(FleetConfig{GPU: "H200", Count: 2, StragglerIndex: -1, CoTenant: bad}); err == nil || !strings.Contains(err.Error(), "co-tenant") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	f, err := NewFleet(FleetConfig{GPU: "H200", Count: 2, StragglerIndex: -1, CoTenant: "1"})
	if err != nil {
		t.Fatal(err)
	}
	f.update(1, 1, func(g *vgpu) { g.usedMiB = 70000 })
	o, err := f.Occupancy(1)
	if err != nil || len(o.Processes) != 2 || !o.Processes[0].Own || o.Processes[0].PID != os.Getpid() ||
		o.Processes[1].PID != CoTenantPID || o.Processes[1].Own || *o.MemoryUsedMiB != 70000+CoTenantMiB || *o.UtilPct != 100 || *o.PowerW < 600 {
		t.Fatalf("%+v %v", o, err)
	}
	if o, _ := f.Occupancy(0); len(o.Processes) != 0 || *o.UtilPct != 0 || *o.PowerW > 100 {
		t.Errorf("gpu 0 (alone): %+v", o)
	}
	a, _, _ := f.Microbench(0, "gemm_bf16")
	b, _, _ := f.Microbench(1, "gemm_bf16")
	if r := b / a; r < CoTenantSpeed*0.97 || r > CoTenantSpeed*1.03 || f.Speed(1) != CoTenantSpeed || f.Speed(0) != 1 {
		t.Errorf("busy/alone %.3f, speeds %v %v", r, f.Speed(0), f.Speed(1))
	}
	gpus, _ := f.GPUs()
	if *gpus[1].MemoryUsedMiB != 70000+CoTenantMiB {
		t.Errorf("inventory memory %d", *gpus[1].MemoryUsedMiB)
	}
	// For part of the run: from 150 ms to 300 ms.
	f, _ = NewFleet(FleetConfig{GPU: "H200", Count: 2, StragglerIndex: -1, CoTenant: "0:150ms-300ms"})
	on := func() bool { o, _ := f.Occupancy(0); return len(o.Processes) == 1 }
	if on() {
		t.Error("co-tenant before its start")
	}
	time.Sleep(200 * time.Millisecond)
	if !on() {
		t.Error("no co-tenant during its span")
	}
	time.Sleep(150 * time.Millisecond)
	if on() {
		t.Error("co-tenant after its end")
	}
}
