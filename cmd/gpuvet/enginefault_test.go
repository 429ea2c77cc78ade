package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
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

// An engine that cannot fetch its model from the hub (the simulator's hub fault: it exits before
// it is ready, in transformers' words) is the infrastructure's finding, to rerun once the node
// reaches the hub or a mirror: the run fails (exit 1), the GPU is not proven (inconclusive), never
// the engine's "fix the engine" nor the GPU's. Every --sim-engine-fault kind is one the config takes.
func TestRunSimEngineWithoutItsHubIsTheInfrastructures(t *testing.T) {
	t.Parallel()
	for _, kind := range sim.EngineFaultKinds {
		if _, err := config.Load(config.Options{Sets: []string{"backend=sim", "sim.gpus=2", "sim.engine_fault=1:" + kind}}); err != nil {
			t.Errorf("sim engine fault %q refused by the config: %v", kind, err)
		}
	}
	code, text, s := runSim(t, "--sim-gpus", "1", "--sim-engine-fault", "0:hub")
	h := s.Hosts[0]
	if code != 1 || s.Status != results.StatusFailed || len(h.GPUs) != 1 || h.GPUs[0].Status != results.StatusInconclusive {
		t.Fatalf("exit %d, run %s, gpus %+v; want 1, failed, gpu 0 inconclusive\n%s", code, s.Status, h.GPUs, text)
	}
	i := slices.IndexFunc(s.Findings, func(f results.Finding) bool { return f.Check == "engine.serve" })
	if i < 0 || s.Findings[i].Layer != results.LayerInfra || s.Findings[i].Action != results.ActionRerun || !strings.Contains(s.Findings[i].Reason, "could not fetch the model from its hub") {
		t.Fatalf("findings %+v, want the infrastructure's engine.serve, rerun", s.Findings)
	}
	if !strings.Contains(text, "infrastructure failed · run again: [engine.serve]") || !strings.Contains(text, "HF_ENDPOINT") {
		t.Errorf("the terminal does not name the infrastructure's finding and what to do:\n%s", text)
	}
}
