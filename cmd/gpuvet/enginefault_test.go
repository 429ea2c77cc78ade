package main

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 41: a simulated GPU whose engine misbehaves (short outputs despite ignore_eos, streams cut
// without a finish reason, HTTP 500 with a Python traceback, a process that exits) is left
// inconclusive with the engine named and the first requests as evidence, never failed or flagged:
// its failed requests are the engine's, not evidence about the GPU. The other GPU is unaffected.
func TestRunSimFaultyEngineIsNamedNotTheGPU(t *testing.T) {
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
			if code != 0 || bad.Status != results.StatusInconclusive {
				t.Fatalf("exit %d, gpu 1 %s (%s), want 0 and inconclusive; verdicts %+v flags %+v\n%s", code, bad.Status, bad.Error, bad.Verdicts, bad.Flags, text)
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
			if v == nil || v.Result != "inconclusive" || !strings.Contains(v.Reason, "the engine misbehaved: ") || !strings.Contains(v.Reason, tc.what) {
				t.Fatalf("engine verdict %+v", v)
			}
			if ev := strings.Join(bad.Faults[0].Evidence, "\n"); !strings.Contains(ev, tc.evidence) || !strings.Contains(ev, "request #") && tc.kind != "exit" {
				t.Errorf("evidence lacks %q:\n%s", tc.evidence, ev)
			}
			for _, fl := range bad.Flags {
				t.Errorf("gpu 1 flagged: %+v", fl)
			}
			if !strings.Contains(text, "the engine misbehaved") {
				t.Errorf("the terminal does not name the engine:\n%s", text)
			}
		})
	}
}
