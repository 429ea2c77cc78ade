package main

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Issues 41 and 50: a simulated GPU whose engine misbehaves (short outputs despite ignore_eos,
// streams cut without a finish reason, HTTP 500 with a Python traceback, a process that exits) is
// an engine finding: the endpoint and the run fail (exit 1) on the engine layer with the action
// "fix the engine", the engine named and the first requests as evidence; the GPU is left
// inconclusive (not proven), never failed or flagged, and its host's hardware status is not
// failed (a gate takes no action on it). The other GPU is unaffected.
func TestRunSimFaultyEngineIsNamedNotTheGPU(t *testing.T) {
	if testing.Short() {
		t.Skip("whole simulated runs (20-85 s each): go test without -short runs them")
	}
	t.Parallel()
	for _, tc := range []struct{ kind, what, evidence string }{
		{"short", "short output despite ignore_eos", "short_output (asked for "},
		{"cut", "stream cut without a finish reason", "cut_stream"},
		{"traceback", "HTTP 500 server error", "Python traceback ending in IndexError"},
		{"exit", "the process exited (exit status 1)", "the engine process exited during the load: exit status 1"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			code, text, s := runSim(t, "--sim-gpus", "2", "--sim-engine-fault", "1:"+tc.kind)
			eps := s.Hosts[0].Models[0].Endpoints
			bad, good := eps[1], eps[0]
			h := s.Hosts[0]
			if code != 1 || bad.Status != results.StatusFailed || s.Status != results.StatusFailed || h.GPUs[1].Status != results.StatusInconclusive {
				t.Fatalf("exit %d, endpoint 1 %s, run %s, gpu 1 %s; want 1, failed, failed, inconclusive; verdicts %+v flags %+v\n%s",
					code, bad.Status, s.Status, h.GPUs[1].Status, bad.Verdicts, bad.Flags, text)
			}
			if s.Layers[results.LayerEngine] != results.StatusFailed || h.HardwareStatus == results.StatusFailed || h.HardwareStatus == results.StatusFlag || h.GPUs[0].Status != results.StatusOK && h.GPUs[0].Status != results.StatusInconclusive {
				t.Errorf("layers %v, hardware %s, gpu 0 %s: want the engine failed, the hardware not failed", s.Layers, h.HardwareStatus, h.GPUs[0].Status)
			}
			if good.Status == results.StatusFailed || good.Status == results.StatusFlag || len(good.Faults) > 0 {
				t.Errorf("gpu 0: %s, faults %+v", good.Status, good.Faults)
			}
			if len(bad.Faults) != 1 || bad.Faults[0].Layer != results.LayerEngine {
				t.Fatalf("gpu 1 faults %+v, want the engine's", bad.Faults)
			}
			var v *results.Verdict
			for i := range bad.Verdicts {
				if bad.Verdicts[i].Check == judge.CheckEngineFault {
					v = &bad.Verdicts[i]
				}
			}
			if v == nil || v.Result != "fail" || !strings.Contains(v.Reason, "the engine misbehaved: ") || !strings.Contains(v.Reason, tc.what) {
				t.Fatalf("engine verdict %+v", v)
			}
			if ev := strings.Join(bad.Faults[0].Evidence, "\n"); !strings.Contains(ev, tc.evidence) || !strings.Contains(ev, "request #") && tc.kind != "exit" {
				t.Errorf("evidence lacks %q:\n%s", tc.evidence, ev)
			}
			for _, fl := range bad.Flags {
				if results.GPULayer(fl.Layer) {
					t.Errorf("gpu 1 flagged: %+v", fl)
				}
			}
			found := false
			for _, f := range s.Findings {
				found = found || f.Layer == results.LayerEngine && f.Status == results.StatusFailed && f.Action == results.ActionFixEngine && f.Check == judge.CheckEngineFault
			}
			if !found {
				t.Errorf("no failed engine finding with fix-engine: %+v", s.Findings)
			}
			if !strings.Contains(text, "the engine misbehaved") || !strings.Contains(text, "engine failed · fix the engine or its configuration: [judge.engine_fault] Qwen/Qwen3-8B on gpu 1") {
				t.Errorf("the terminal does not name the engine's finding and action:\n%s", text)
			}
		})
	}
}
