package power

import (
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

func i64(v int64) *int64 { return &v }

// Issue 33: samples are kept per GPU, aligned to the load's clock, summarised per rung (its
// measured window only), bounded, and the counters' growth is what happened during the load.
func TestRecorderAlignsToRungsAndBounds(t *testing.T) {
	start := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	rec := NewRecorder([]int{0, 3})
	// 2000 samples at 10 Hz from 1 s before the load's clock: GPU 3 is under hw_slowdown (0x8)
	// from 100 s on.
	for i := 0; i < 2000; i++ {
		at := start.Add(time.Duration(i)*100*time.Millisecond - time.Second)
		rec.Add(0, results.PowerSample{PowerW: 600, SMClockMHz: 1980, TempC: 60, UtilPct: 100, ClockReasons: 0x4, MemClockMHz: 3201}, at)
		s := results.PowerSample{PowerW: 600, SMClockMHz: 1980, TempC: 60, UtilPct: 100, ClockReasons: 0x4}
		if at.Sub(start) >= 100*time.Second {
			s.ClockReasons, s.SMClockMHz, s.PowerW = 0x8, 990, 300
		}
		rec.Add(3, s, at)
	}
	ld := &results.Load{StartedAt: start, Runs: []results.Run{
		{Kind: "synchronous", WindowStartS: 10, WindowSeconds: 80},
		{Kind: "constant", TargetRate: 12.5, WindowStartS: 90, WindowSeconds: 20},
	}}
	xid := results.XIDEvent{Time: start.Add(50 * time.Second), XID: 79, Note: "GPU has fallen off the bus"}
	old := results.XIDEvent{Time: start.Add(-time.Hour), XID: 13}
	before := map[int]gpu.ErrorCounts{0: {ECCUncorrected: i64(2), PCIeReplays: i64(10), XIDs: []results.XIDEvent{old}}, 3: {}}
	after := map[int]gpu.ErrorCounts{0: {ECCUncorrected: i64(3), PCIeReplays: i64(10), XIDs: []results.XIDEvent{old, xid}}, 3: {Note: "nvmlDeviceGetPcieReplayCounter: not supported"}}
	tel := rec.Result("nvml", 100*time.Millisecond, ld, before, after)
	if len(tel.GPUs) != 2 || tel.GPUs[1].GPU != 3 {
		t.Fatalf("%+v", tel)
	}
	g0, g3 := tel.GPUs[0], tel.GPUs[1]
	if len(g0.Samples) > results.TelemetryMaxSamples || g0.Stride != 4 || g0.Samples[0].T != -1 || g0.Samples[1].T != -0.6 {
		t.Errorf("bounded series: %d samples, stride %d, first at %v, %v", len(g0.Samples), g0.Stride, g0.Samples[0].T, g0.Samples[1].T)
	}
	r0, r1 := g3.Rungs[0], g3.Rungs[1]
	if r0.Label != "synchronous" || r1.Label != "constant 12.5 req/s" || r0.StartS != 10 || r1.EndS != 110 {
		t.Errorf("rungs %+v %+v", r0, r1)
	}
	if r0.Samples != 801 || r0.ReasonShare["sw_power_cap"] != 1 || r0.ReasonShare["hw_slowdown"] != 0 || r0.SMClockMeanMHz != 1980 {
		t.Errorf("rung 0 %+v", r0)
	}
	// Samples 90.0..110.0 s: 100 before hw_slowdown, 101 under it.
	if r1.Samples != 201 || r1.ReasonShare["hw_slowdown"] != 0.5 || r1.SMClockMinMHz != 990 || r1.PowerMaxW != 600 {
		t.Errorf("rung 1 %+v", r1)
	}
	if g0.Rungs[0].MemClockMeanMHz != 3201 {
		t.Errorf("memory clock %+v", g0.Rungs[0])
	}
	if g0.ECCUncorrected == nil || *g0.ECCUncorrected != 1 || *g0.PCIeReplays != 0 || len(g0.XIDs) != 1 || g0.XIDs[0].XID != 79 {
		t.Errorf("counters %+v", g0)
	}
	if g3.ECCUncorrected != nil || g3.CountersNote == "" {
		t.Errorf("unread counters %+v", g3)
	}
}
