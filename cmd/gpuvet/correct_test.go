package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 33: a simulated GPU that computes wrong answers fails `gpuvet run --sim`, with the count
// of wrong burn results and when they started; its sibling's burn checked every result and passed.
func TestRunSimCorruptGPUFails(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	code, text, s := runSim(t, "--sim-gpus", "2", "--sim-corrupt", "1", "--set", "health.burn=2s")
	if code != 1 || s.Status != results.StatusFailed {
		t.Fatalf("exit %d, status %s, want 1 and failed:\n%s", code, s.Status, text)
	}
	h := s.Hosts[0].Health
	bad, good := h.GPUs[1], h.GPUs[0]
	if bad.Status != results.StatusFailed || bad.Burn == nil || bad.Burn.Check == nil || bad.Burn.Check.Mismatches == 0 || bad.Burn.Check.FirstMismatchS == nil {
		t.Fatalf("gpu 1: status %s burn %+v", bad.Status, bad.Burn)
	}
	if good.Burn == nil || good.Burn.Check == nil || good.Burn.Check.Checked == 0 || good.Burn.Check.Mismatches != 0 {
		t.Errorf("gpu 0 burn check: %+v", good.Burn)
	}
	if !strings.Contains(text, "[health.result_check] gpu 1") || !strings.Contains(text, "the burn computed wrong answers") || strings.Contains(text, "[health.result_check] gpu 0") {
		t.Errorf("output:\n%s", text)
	}
}

// `gpuvet health --sim --sim-corrupt` fails (exit 1) and its JSON keeps the counts.
func TestHealthSimCorruptGPUFails(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "health.json")
	b, err := gpuvet("health", "--sim", "--sim-gpus", "2", "--sim-corrupt", "0", "--burn", "1500ms", "--out", out).CombinedOutput()
	if ee, ok := err.(interface{ ExitCode() int }); !ok || ee.ExitCode() != 1 {
		t.Fatalf("err %v, want exit 1:\n%s", err, b)
	}
	var h results.Health
	raw, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(raw, &h) != nil {
		t.Fatalf("no result: %v", err)
	}
	if !h.GPUs[0].Burn.Check.Failed() || h.GPUs[1].Burn.Check.Failed() || h.GPUs[1].Status != results.StatusOK {
		t.Errorf("checks %+v / %+v", h.GPUs[0].Burn.Check, h.GPUs[1].Burn.Check)
	}
	if !strings.Contains(string(b), "RESULTS CHECKED / WRONG") {
		t.Errorf("no check column:\n%s", b)
	}
	if b, err := gpuvet("health", "--sim-corrupt", "0").CombinedOutput(); err == nil || !strings.Contains(string(b), "--sim-corrupt and --sim-throttle need --sim") {
		t.Errorf("--sim-corrupt without --sim: %v\n%s", err, b)
	}
}

// Issue 33: the corrupt GPU's greedy outputs drift from its siblings'; the judge flags it, and
// only it, "outputs differ" with the first differing position; the others agree by token ids.
func TestRunSimCorruptGPUOutputsDiffer(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	_, text, s := runSim(t, "--sim-gpus", "3", "--sim-corrupt", "2", "--set", "functional.enabled=true")
	eps := s.Hosts[0].Models[0].Endpoints
	if len(eps) != 3 {
		t.Fatalf("%d endpoints:\n%s", len(eps), text)
	}
	for i, ep := range eps {
		g := ep.Functional.Greedy
		if g == nil || g.Basis != "token_ids" || g.RepeatDiff != nil {
			t.Fatalf("gpu %d greedy %+v", i, g)
		}
		differ := false
		for _, f := range ep.Flags {
			differ = differ || f.Check == "judge.outputs_differ"
		}
		if differ != (i == 2) {
			t.Errorf("gpu %d: outputs_differ flagged %v; flags %+v", i, differ, ep.Flags)
		}
	}
	if !strings.Contains(text, "[judge.outputs_differ] Qwen/Qwen3-8B on gpu 2: outputs differ: they differ from the majority's (gpus 0,1) at prompt 0, token 5") {
		t.Errorf("output lacks the outputs_differ flag:\n%s", text)
	}
}

// Issue 33: a simulated GPU throttled by hw_power_brake_slowdown is explained by its reasons in
// `gpuvet run --sim`; each GPU's telemetry is in the summary, aligned to the rungs; the healthy GPU
// at its power cap is not flagged for it. The brake is the system's (a PSU, the BMC): the finding
// is the host's, never the GPU's "return it for repair".
func TestRunSimThrottledGPUIsExplained(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	_, text, s := runSim(t, "--sim-gpus", "2", "--sim-throttle", "1:hw_power_brake_slowdown")
	eps := s.Hosts[0].Models[0].Endpoints
	for i, ep := range eps {
		tel := ep.Telemetry
		if tel == nil || len(tel.GPUs) != 1 || tel.GPUs[0].GPU != i || len(tel.GPUs[0].Samples) == 0 || len(tel.GPUs[0].Rungs) != len(ep.Load.Runs) {
			t.Fatalf("gpu %d telemetry %+v", i, tel)
		}
		sampled := 0
		for _, r := range tel.GPUs[0].Rungs {
			sampled += r.Samples
		}
		if sampled == 0 {
			t.Errorf("gpu %d: no sample inside any rung: %+v", i, tel.GPUs[0].Rungs)
		}
		explained := false
		for _, f := range ep.Flags {
			explained = explained || (f.Check == "judge.power_brake" && f.Layer == results.LayerHost && strings.Contains(f.Reason, "under the load (rung"))
			if f.Check == "judge.clock_events" || f.Check == "judge.throttled" {
				t.Errorf("gpu %d: the brake flagged the GPU: %+v", i, f)
			}
		}
		if explained != (i == 1) {
			t.Errorf("gpu %d: power_brake flag %v; flags %+v", i, explained, ep.Flags)
		}
	}
	for _, g := range s.Hosts[0].GPUs {
		if g.Status == results.StatusFailed || g.Index == 1 && g.Status != results.StatusInconclusive {
			t.Errorf("gpu %d: %s (%s), want gpu 1 inconclusive (the brake is the host's) and no GPU failed", g.Index, g.Status, g.Action)
		}
	}
	if !strings.Contains(text, "host flag · drain and return for repair (RMA): [health.power_brake] gpu 1") {
		t.Errorf("the health phase did not see the brake while the benchmarks ran:\n%s", text)
	}
	if !strings.Contains(text, "host flag · drain and return for repair (RMA): [judge.power_brake] Qwen/Qwen3-8B on gpu 1: gpu 1: under the load (rung") {
		t.Errorf("output:\n%s", text)
	}
}
