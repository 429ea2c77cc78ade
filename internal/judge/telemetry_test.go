package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

func flagsBy(ep results.Endpoint, check string) []string {
	var out []string
	for _, f := range ep.Flags {
		if f.Check == check {
			out = append(out, f.Reason)
		}
	}
	return out
}

// Issue 33: a rung whose throughput fell while a hardware reason fired says so with its share;
// the reasons are named per rung; XIDs, uncorrected ECC and a burst of PCIe replays during the
// load flag the GPU although its figures pass; sw_power_cap alone is a loaded GPU, not a flag.
func TestTelemetryVerdicts(t *testing.T) {
	runs := []results.Run{{Kind: "throughput", Concurrency: 16, OutputTokS: 1000}, {Kind: "throughput", Concurrency: 32, OutputTokS: 1500}, {Kind: "constant", TargetRate: 40, OutputTokS: 1320}}
	rung := func(k, clk int, share map[string]float64) results.RungTelemetry {
		return results.RungTelemetry{Rung: k, Label: "r", Samples: 10, SMClockMeanMHz: clk, ReasonShare: share}
	}
	healthy := results.GPUTelemetry{GPU: 0, Rungs: []results.RungTelemetry{rung(0, 1980, map[string]float64{"sw_power_cap": 1}), rung(1, 1980, nil), rung(2, 1975, map[string]float64{"sw_power_cap": 0.5})},
		ECCUncorrected: i64(0), PCIeReplays: i64(3)}
	ep := results.Endpoint{GPUs: []int{0}, Load: &results.Load{Runs: runs}, Telemetry: &results.Telemetry{GPUs: []results.GPUTelemetry{healthy}}}
	telemetryFlags("m", &ep)
	if len(ep.Flags) != 0 {
		t.Fatalf("a healthy GPU at its power cap is flagged: %+v", ep.Flags)
	}

	throttled := results.GPUTelemetry{GPU: 1, Rungs: []results.RungTelemetry{rung(0, 1980, nil), rung(1, 1980, nil), rung(2, 1200, map[string]float64{"hw_slowdown": 0.4, "sw_power_cap": 0.6})},
		XIDs:           []results.XIDEvent{{Time: time.Date(2026, 12, 1, 14, 3, 4, 0, time.UTC), XID: 48, Note: "double-bit ECC error"}},
		ECCUncorrected: i64(2), PCIeReplays: i64(500)}
	ep = results.Endpoint{GPUs: []int{1}, Load: &results.Load{Runs: runs}, Telemetry: &results.Telemetry{GPUs: []results.GPUTelemetry{throttled}},
		Flags: []results.Flag{{Check: CheckGPUToGPU}}}
	telemetryFlags("m", &ep)
	for check, want := range map[string]string{
		CheckThrottled:       "gpu 1: rung 3 (r): 12 % below rung 2 while hw_slowdown was active 40 % of the rung",
		CheckLoadClockEvents: "hw_slowdown in rung 3 of 3 (40 % of each); SM clock down to 1200 MHz against 1980 MHz in the rungs without them; this explains its GPU-to-GPU gap",
		CheckXIDLoad:         "XID 48 at 14:03:04 (double-bit ECC error) during the load",
		CheckECCLoad:         "2 uncorrected ECC error(s) during the load",
		CheckReplayLoad:      "grew by 500",
	} {
		got := flagsBy(ep, check)
		if len(got) != 1 || !strings.Contains(got[0], want) {
			t.Errorf("%s: %q, want %q", check, got, want)
		}
	}
	// The judge applies them and the endpoint is flagged.
	m := &results.Model{Model: "m", Endpoints: []results.Endpoint{{GPUs: []int{1}, Status: results.StatusOK, Load: &results.Load{Runs: runs}, Telemetry: &results.Telemetry{GPUs: []results.GPUTelemetry{throttled}}}}}
	applyModel(m, Config{}, 1, false, nil)
	applyModel(m, Config{}, 1, false, nil)
	if len(flagsBy(m.Endpoints[0], CheckXIDLoad)) != 1 || m.Endpoints[0].Status != results.StatusFlag {
		t.Errorf("applied: %s %+v", m.Endpoints[0].Status, m.Endpoints[0].Flags)
	}
	if got := rungList([]int{1, 2, 3, 5, 7, 8}); got != "rungs 1–3, 5, 7–8" {
		t.Errorf("rungList = %q", got)
	}
}

func i64(v int64) *int64 { return &v }

// A hardware reason seen in a blip of a rung (under minReasonShare of its samples) is not a
// throttle for the rung's fall either: the first constant rung after the throughput probe always
// reads far below it (it asks for less), and one hw_slowdown sample in 50 flagged the GPU
// judge.throttled (drain-rma) where the clock-event rule called it a blip.
func TestThrottledIgnoresABlip(t *testing.T) {
	runs := []results.Run{{Kind: "synchronous", Concurrency: 1, OutputTokS: 60}, {Kind: "throughput", Concurrency: 128, OutputTokS: 9000}, {Kind: "constant", TargetRate: 4, OutputTokS: 1000}}
	gt := results.GPUTelemetry{GPU: 0, Rungs: []results.RungTelemetry{{Rung: 0, Samples: 50}, {Rung: 1, Samples: 50},
		{Rung: 2, Samples: 50, SMClockMeanMHz: 1980, ReasonShare: map[string]float64{"hw_slowdown": 0.02}}}}
	ep := results.Endpoint{GPUs: []int{0}, Load: &results.Load{Runs: runs}, Telemetry: &results.Telemetry{GPUs: []results.GPUTelemetry{gt}}}
	telemetryFlags("m", &ep)
	if len(ep.Flags) != 0 {
		t.Errorf("a 2 %% blip flagged the GPU: %+v", ep.Flags)
	}
}
