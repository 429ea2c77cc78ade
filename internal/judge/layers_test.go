package judge

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 50: a Kubernetes node whose health Job refused the plan (its image an older gpuvet) and
// whose load Jobs gave no result: the infrastructure's, not the GPUs'. The node and the run fail
// on the infrastructure layer; its GPUs are not proven (inconclusive), and its hardware status,
// what a taint or a drain acts on, is not failed.
func TestInfrastructureFailureIsNotTheGPUs(t *testing.T) {
	s := summary(healthy(), healthy())
	h := &s.Hosts[0]
	h.Health = &results.Health{Source: "kubernetes", Status: results.StatusFailed, ErrorLayer: results.LayerInfra,
		Error: "job gpuvet-health-0: no gpuvet result in the log; the Job's gpuvet refused a key of the plan this gpuvet sent"}
	for i := range h.Models[0].Endpoints {
		ep := &h.Models[0].Endpoints[i]
		ep.Load, ep.Status, ep.Error, ep.ErrorLayer = nil, results.StatusFailed, "load: load job against engine pod gpuvet-engine-0: BackoffLimitExceeded", results.LayerInfra
	}
	Apply(s, DefaultConfig())
	if s.Status != results.StatusFailed || h.Status != results.StatusFailed || s.Layers[results.LayerInfra] != results.StatusFailed {
		t.Fatalf("run %s host %s layers %v: want failed on the infrastructure", s.Status, h.Status, s.Layers)
	}
	for _, g := range h.GPUs {
		if g.Status != results.StatusInconclusive || !strings.Contains(strings.Join(g.Why, " "), "infrastructure") {
			t.Errorf("gpu %d: %s %q, want inconclusive (not proven, the infrastructure's)", g.Index, g.Status, g.Why)
		}
	}
	if h.GateStatus() != results.StatusInconclusive || h.Action != "" {
		t.Errorf("hardware status %s action %q: a gate must not act on an infrastructure failure", h.GateStatus(), h.Action)
	}
	for _, f := range s.Findings {
		if results.GPULayer(f.Layer) {
			t.Errorf("a GPU finding: %+v", f)
		}
	}
}

// The same health phase broken by the GPU itself (its words name a GPU fault) fails the GPU.
func TestHealthErrorNamingTheGPUFailsIt(t *testing.T) {
	s := summary(healthy())
	h := &s.Hosts[0]
	h.Health.Error = "gemm_bf16: CUDA error: an illegal memory access was encountered"
	h.Health.Status = results.StatusFailed
	for i := range h.Health.GPUs {
		h.Health.GPUs[i].Status, h.Health.GPUs[i].Bench = results.StatusFailed, nil
	}
	Apply(s, DefaultConfig())
	if g := h.GPUs[0]; g.Status != results.StatusFailed {
		t.Errorf("gpu 0: %s %q, want failed on the GPU's own words", g.Status, g.Why)
	}
	found := false
	for _, f := range s.Findings {
		found = found || f.Check == "health.error" && f.Layer == results.LayerGPU && f.Status == results.StatusFailed
	}
	if !found {
		t.Errorf("no failed GPU finding for the health error: %+v", s.Findings)
	}
}

// An SLO gate missed on a GPU whose health passed, behind an engine far below its roofline, is the
// engine's: the endpoint flagged with fix-engine, the GPU ok; the same miss without a health phase
// stays the GPU's and asks for a rerun with health.
func TestEngineBoundGateIsTheEngines(t *testing.T) {
	for _, withHealth := range []bool{true, false} {
		s := summary(healthy())
		h := &s.Hosts[0]
		if !withHealth {
			h.Health = nil
		}
		ep := &h.Models[0].Endpoints[0]
		r := FindRun(ep.Load, RunSynchronous)
		r.ITL.P95 = 70 // over the 50 ms default gate
		ep.SpeedOfLight = &results.SpeedOfLight{BoundOutputTokS: 15903, MeasuredOutputTokS: 491, Percent: 3.1}
		Apply(s, DefaultConfig())
		itl := flagOf(ep, "gate.itl_p95")
		switch {
		case itl == nil:
			t.Fatalf("health %v: the ITL gate did not fire: %+v", withHealth, ep.Verdicts)
		case withHealth && (itl.Layer != results.LayerEngine || itl.Action != results.ActionFixEngine || !strings.Contains(itl.Reason, "3.1 % of its roofline") || strings.Contains(itl.Reason, "check the GPU's clocks")):
			t.Errorf("with health: %+v", *itl)
		case withHealth && h.GPUs[0].Status == results.StatusFlag:
			t.Errorf("with health: gpu 0 flagged for the engine's ITL")
		case !withHealth && (itl.Layer != results.LayerGPU || itl.Action != results.ActionRerun):
			t.Errorf("without health: %+v", *itl)
		}
	}
}

// Issue 51: a run stopped with Ctrl-C is no layer's failure. Its endpoints were "the engine did
// not serve: load: interrupted (context canceled)" (engine failed) and their cut rungs the
// client's to rerun; now the interruption is said once, by the run.
func TestInterruptedEndpointIsNoLayersFinding(t *testing.T) {
	s := summary(healthy(), healthy())
	s.Error = "interrupted (interrupt signal received): stopped while running m on gpu 0, m on gpu 1; results are partial"
	for i := range s.Hosts[0].Models[0].Endpoints {
		ep := &s.Hosts[0].Models[0].Endpoints[i]
		ep.Status, ep.Error = results.StatusInterrupted, "load: interrupted (interrupt signal received)"
		ep.Load.Interrupted = true
	}
	Apply(s, DefaultConfig())
	for _, f := range s.Findings {
		if f.Layer == results.LayerEngine || f.Layer == results.LayerClient || results.GPULayer(f.Layer) {
			t.Errorf("a finding of a layer from an interruption: %+v", f)
		}
	}
	if s.Layers[results.LayerEngine] != "" || s.Layers[results.LayerClient] != "" {
		t.Errorf("layers %v: an interruption is not the engine's or the client's", s.Layers)
	}
}

// A GPU the power brake slowed at the health phase (and not in the load's samples: a brake that
// comes and goes) misses a latency gate: the miss is the host's power's, drain-rma, and the GPU is
// not proven rather than flagged; the same miss without the brake is not the host's.
func TestGateMissAfterAHealthBrakeIsTheHosts(t *testing.T) {
	for _, brakeOn := range []bool{true, false} {
		s := summary(healthy())
		h := &s.Hosts[0]
		if brakeOn {
			h.Health.GPUs[0].GPU.ClockEvents.Mask = results.ClockHWPowerBrakeSlowdown
		}
		Health(h.Health, DefaultHealthRules())
		ep := &h.Models[0].Endpoints[0]
		FindRun(ep.Load, RunSynchronous).ITL.P95 = 70 // over the 50 ms default gate
		Apply(s, DefaultConfig())
		itl := flagOf(ep, "gate.itl_p95")
		switch {
		case itl == nil:
			t.Fatalf("brake %v: the ITL gate did not fire: %+v", brakeOn, ep.Verdicts)
		case brakeOn && (itl.Layer != results.LayerHost || itl.Action != results.ActionDrainRMA || !strings.Contains(itl.Reason, "at the health phase")):
			t.Errorf("braked at health: %+v", *itl)
		case brakeOn && (h.GPUs[0].Status == results.StatusFlag || h.GPUs[0].Status == results.StatusFailed || h.GPUs[0].Status == results.StatusOK):
			t.Errorf("braked at health: gpu 0 %s, want not proven", h.GPUs[0].Status)
		case !brakeOn && itl.Layer == results.LayerHost:
			t.Errorf("no brake: the miss given to the host: %+v", *itl)
		}
	}
}

// An engine that did not serve is judged by its own words: the model hub out of reach is the
// infrastructure's, a full disk the host's, a refused (gated) model the engine's configuration, a
// device fault the engine's to rerun, the GPU's own words the GPU's; each leaves the GPU not proven
// but the last. The messages are huggingface_hub's, transformers' and CUDA's as engines print them.
func TestEngineBreakNamesItsLayer(t *testing.T) {
	cases := []struct {
		name, log, layer, action, says string
		gpu                            results.Status
	}{
		{"hub offline", "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files and it looks like Qwen/Qwen3-8B is not the path to a directory containing a file named config.json.",
			results.LayerInfra, results.ActionRerun, "could not fetch the model", results.StatusInconclusive},
		{"hub cache miss", "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub and we cannot find the requested files in the local cache.",
			results.LayerInfra, results.ActionRerun, "HF_ENDPOINT", results.StatusInconclusive},
		{"hub timeout", `requests.exceptions.ReadTimeout: (ReadTimeoutError("HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)"), '(Request ID: 1)')`,
			results.LayerInfra, results.ActionRerun, "model_cache", results.StatusInconclusive},
		{"gated model", "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json.",
			results.LayerEngine, results.ActionFixEngine, "HF_TOKEN", results.StatusInconclusive},
		{"disk full", "OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/models--Qwen--Qwen3-8B/blobs/3f2a.incomplete'",
			results.LayerHost, results.ActionRerun, "disk is full", results.StatusInconclusive},
		{"device fault", "RuntimeError: CUDA error: an illegal memory access was encountered",
			results.LayerEngine, results.ActionRerun, "rerun with a fresh engine", results.StatusInconclusive},
		{"no kernel image", "RuntimeError: CUDA error: no kernel image is available for execution on the device",
			results.LayerEngine, results.ActionFixEngine, "the engine did not serve", results.StatusInconclusive},
		{"the GPU's own words", "RuntimeError: CUDA error: uncorrectable ECC error encountered",
			results.LayerGPU, results.ActionResetGPU, "the engine did not serve", results.StatusFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := summary(healthy(), healthy())
			ep := &s.Hosts[0].Models[0].Endpoints[1]
			ep.Error, ep.LogTail, ep.Load = "the engine exited before it was ready: exit status 1", "Traceback (most recent call last):\n"+c.log, nil
			Apply(s, DefaultConfig())
			i := slices.IndexFunc(s.Findings, func(f results.Finding) bool { return f.Check == "engine.serve" })
			if i < 0 {
				t.Fatalf("no engine.serve finding: %+v", s.Findings)
			}
			if f := s.Findings[i]; f.Layer != c.layer || f.Action != c.action || !strings.Contains(f.Reason, c.says) {
				t.Errorf("finding %s %s %q; want %s %s saying %q", f.Layer, f.Action, f.Reason, c.layer, c.action, c.says)
			}
			if g := s.Hosts[0].GPUs[1]; g.Status != c.gpu {
				t.Errorf("gpu 1 %s, want %s", g.Status, c.gpu)
			}
		})
	}
}
