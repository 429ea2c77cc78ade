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
	applyModel(m, Config{}, 1, false, nil, nil)
	applyModel(m, Config{}, 1, false, nil, nil)
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

// The system's power brake (a PSU or the BMC asserts it) is the host's: a GPU braked during the
// load is not flagged for a return, its gap to its siblings leaves it not proven, and hw_slowdown
// beside the brake is the brake's; beside a thermal reason it is still the GPU's.
func TestPowerBrakeIsTheHosts(t *testing.T) {
	runs := []results.Run{{Kind: "throughput", Concurrency: 16, OutputTokS: 1000}, {Kind: "throughput", Concurrency: 32, OutputTokS: 1500}, {Kind: "constant", TargetRate: 40, OutputTokS: 900}}
	braked := results.GPUTelemetry{GPU: 1, Rungs: []results.RungTelemetry{{Rung: 0, Samples: 10, SMClockMeanMHz: 1980}, {Rung: 1, Samples: 10, SMClockMeanMHz: 1980},
		{Rung: 2, Samples: 10, SMClockMeanMHz: 900, ReasonShare: map[string]float64{"hw_slowdown": 0.9, brakeName: 0.9}}}}
	ep := results.Endpoint{GPUs: []int{1}, Status: results.StatusOK, Load: &results.Load{Runs: runs}, Telemetry: &results.Telemetry{GPUs: []results.GPUTelemetry{braked}},
		Flags: []results.Flag{{Scope: "gpu", Check: CheckGPUToGPU, Reason: "output_tok_s 900 on gpu 1 is 40 % below the best"}}}
	telemetryFlags("m", &ep)
	brakeLayers(&ep, nil)
	classifyAll(ep.Flags)
	if got := flagsBy(ep, CheckLoadPowerBrake); len(got) != 1 || !strings.Contains(got[0], "rung 3 of 3") || !strings.Contains(got[0], "PSU") {
		t.Errorf("power brake: %q", got)
	}
	for _, f := range ep.Flags {
		if f.Check == CheckThrottled || f.Check == CheckLoadClockEvents {
			t.Errorf("the brake (and hw_slowdown beside it) flagged the GPU: %+v", f)
		}
		if f.Layer != results.LayerHost || f.Action != results.ActionDrainRMA {
			t.Errorf("%s: layer %s, action %s; want the host's, drain-rma", f.Check, f.Layer, f.Action)
		}
	}
	if st, why := gpuServing(&ep); st != results.StatusInconclusive || !strings.Contains(strings.Join(why, " "), "power brake") {
		t.Errorf("the braked GPU: %s %q, want inconclusive, naming the brake", st, why)
	}
	// A thermal reason beside the brake is still the GPU's.
	braked.Rungs[2].ReasonShare["hw_thermal_slowdown"] = 0.5
	ep = results.Endpoint{GPUs: []int{1}, Load: &results.Load{Runs: runs}, Telemetry: &results.Telemetry{GPUs: []results.GPUTelemetry{braked}}}
	telemetryFlags("m", &ep)
	if got := flagsBy(ep, CheckLoadClockEvents); len(got) != 1 || !strings.Contains(got[0], "hw_thermal_slowdown") || !strings.Contains(got[0], "hw_slowdown") || strings.Contains(got[0], brakeName+" in") {
		t.Errorf("thermal beside the brake: %q", got)
	}
	if len(flagsBy(ep, CheckLoadPowerBrake)) != 1 {
		t.Errorf("the brake beside a thermal reason: %+v", ep.Flags)
	}
}

// At inventory and under the burn, the brake is the host's too, and hw_slowdown with it.
func TestHealthPowerBrakeIsTheHosts(t *testing.T) {
	if got := gpuClockReasons(results.ClockHWSlowdown | results.ClockHWPowerBrakeSlowdown); got != 0 {
		t.Errorf("brake and hw_slowdown: GPU reasons %#x, want none", got)
	}
	if got := gpuClockReasons(results.ClockHWSlowdown | results.ClockHWPowerBrakeSlowdown | results.ClockHWThermalSlowdown); got != results.ClockHWSlowdown|results.ClockHWThermalSlowdown {
		t.Errorf("brake, thermal and hw_slowdown: GPU reasons %#x", got)
	}
	if got := gpuClockReasons(results.ClockHWSlowdown | results.ClockSWPowerCap); got != results.ClockHWSlowdown {
		t.Errorf("hw_slowdown alone: %#x", got)
	}
}

// A GPU the power brake slowed at the health phase: its figures under their floors and its gap to
// its siblings are the host's, so it is not proven (inconclusive), not flagged for a return; a GPU
// as slow without the brake is flagged.
func TestHealthFiguresUnderTheBrakeAreTheHosts(t *testing.T) {
	for _, brakeOn := range []bool{true, false} {
		h := &results.Health{Source: "nvml"}
		for _, i := range []int{0, 1, 2} {
			v, g := 780.0, results.GPUInfo{Index: i, Name: "NVIDIA H200", UUID: "GPU-" + string(rune('a'+i))}
			if i == 1 {
				v = 390 // half its peers, under the 0.55 floor of 989
				if brakeOn {
					g.ClockEvents.Mask = results.ClockHWPowerBrakeSlowdown | results.ClockHWSlowdown
				}
			}
			peak := 989.0
			h.GPUs = append(h.GPUs, results.GPUHealth{GPU: g, Bench: []results.Microbench{{Name: "gemm_bf16", Value: v, Unit: "TFLOP/s", Status: results.StatusOK,
				Peak: &peak, Ratio: new(v / peak)}}})
		}
		Health(h, DefaultHealthRules())
		g := h.GPUs[1]
		checks := map[string]string{}
		for _, f := range g.Flags {
			checks[f.Check] = f.Layer
		}
		st, why := gpuHealth(g)
		if brakeOn {
			if checks[CheckPowerBrake] != results.LayerHost || checks[CheckFloor] != results.LayerHost || checks[CheckGPUToGPU] != results.LayerHost || checks[CheckClockEvents] != "" {
				t.Errorf("braked: flags by layer %v, want the brake, the floor and the gap the host's and no clock-event flag", checks)
			}
			if st != results.StatusInconclusive || !strings.Contains(strings.Join(why, " "), "power brake") {
				t.Errorf("braked: %s %q, want inconclusive naming the brake", st, why)
			}
			v := gpuVerdicts(&results.Host{Health: h})
			for _, gv := range v {
				if gv.Index == 1 && (gv.Health != results.StatusInconclusive || gv.Action == results.ActionDrainRMA) {
					t.Errorf("braked GPU's verdict: health %s, action %q; want inconclusive, no GPU action", gv.Health, gv.Action)
				}
			}
			continue
		}
		if checks[CheckFloor] != results.LayerGPU || checks[CheckGPUToGPU] != results.LayerGPU || st != results.StatusFlag {
			t.Errorf("as slow, no brake: %v %s, want the GPU's floor and gap, flag", checks, st)
		}
	}
}
