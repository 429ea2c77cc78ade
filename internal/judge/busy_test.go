package judge

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A shared GPU's endpoint is flagged by name, none of its gates passes, and it is left out of the
// GPU-to-GPU comparison (a co-tenant at a third of the speed would otherwise flag it as a straggler,
// or, as the best, flag its healthy siblings); --allow-busy keeps it as measured.
func TestBusyEndpoint(t *testing.T) {
	for _, allow := range []bool{false, true} {
		s := summary(healthy(), healthy().scaled(0.6), healthy())
		at, rung := 12.0, 2
		ep := &s.Hosts[0].Models[0].Endpoints[1]
		ep.Busy = []results.Busy{{When: "during the load", T: &at, Rung: &rung, Reason: "gpu 1 busy: PID 4242 python3, 8.1 GiB", Allowed: allow}}
		Apply(s, DefaultConfig())
		Apply(s, DefaultConfig()) // idempotent
		var busyFlags int
		for _, f := range ep.Flags {
			if f.Check == CheckBusy {
				busyFlags++
				if !strings.Contains(f.Reason, "gpu 1 busy: PID 4242 python3, 8.1 GiB (during the load, 12 s in, rung 3)") {
					t.Errorf("reason %q", f.Reason)
				}
			}
		}
		if busyFlags != map[bool]int{false: 1, true: 0}[allow] {
			t.Errorf("allow %v: %d busy flags: %+v", allow, busyFlags, ep.Flags)
		}
		for _, v := range ep.Verdicts {
			if !allow && v.Result == ResultPass {
				t.Errorf("a gate passed on a shared GPU: %+v", v)
			}
		}
		inCompare := false
		for _, c := range s.Hosts[0].Models[0].Comparisons {
			for _, cell := range c.Values {
				inCompare = inCompare || cell.GPU == 1
			}
		}
		if inCompare == !allow || ep.Status != results.StatusFlag {
			t.Errorf("allow %v: in the comparison %v, status %s", allow, inCompare, ep.Status)
		}
		if st := s.Hosts[0].Models[0].Endpoints[0].Status; st != results.StatusOK {
			t.Errorf("allow %v: a healthy sibling is %s", allow, st)
		}
	}
}

// Nor does a shared GPU's figure enter a baseline comparison, on either side.
func TestBusyEndpointNotInBaseline(t *testing.T) {
	base, env := summary(healthy(), healthy()), summary(healthy(), healthy().scaled(0.6))
	env.Hosts[0].Models[0].Endpoints[1].Busy = []results.Busy{{When: "before the engine", Reason: "gpu 1 busy: PID 4242 python3, 8.1 GiB"}}
	bc := CompareBaseline(base, []*results.Summary{env}, 10, DefaultConfig().LLMGuardsFrom())
	for _, fl := range BaselineFlags(bc) {
		if strings.Contains(fl.Subject, "gpu 1") {
			t.Errorf("a shared GPU's figure breached the baseline: %+v", fl)
		}
	}
	env.Hosts[0].Models[0].Endpoints[1].Busy = nil
	if len(BaselineFlags(CompareBaseline(base, []*results.Summary{env}, 10, DefaultConfig().LLMGuardsFrom()))) == 0 {
		t.Error("the same slow GPU, not shared, breached nothing: the test proves nothing")
	}
}

// docs/busy-h200.md, call 3: a gate missed on a GPU a co-tenant shared (ITL p95 72.7 ms beside it,
// 34.3 ms alone) is the host's, to rerun when the GPU is gpuvet's alone: the endpoint and the run
// flag, the GPU is not proven. It was the GPU's (reset-gpu), flagging a card on another process's load.
func TestGateMissedOnASharedGPUIsNotTheGPUs(t *testing.T) {
	for _, withHealth := range []bool{true, false} {
		s := summary(healthy())
		h := &s.Hosts[0]
		if withHealth {
			h.Health.GPUs[0].Busy = &results.Busy{When: "health", Reason: "busy: PID 1058 python3, 1.1 GiB"}
			Health(h.Health, DefaultHealthRules())
		} else {
			h.Health = nil
		}
		ep := &h.Models[0].Endpoints[0]
		ep.Busy = []results.Busy{{When: "before the engine", Reason: "gpu 0 busy: PID 1058 python3, 1.1 GiB"}}
		FindRun(ep.Load, RunSynchronous).ITL.P95 = 72.7
		Apply(s, DefaultConfig())
		gate := flagOf(ep, "gate.itl_p95")
		if gate == nil {
			t.Fatalf("health %v: the ITL gate did not fire: %+v", withHealth, ep.Verdicts)
		}
		if gate.Layer != results.LayerHost || gate.Action != results.ActionRerun {
			t.Errorf("health %v: gate flag %s/%s, want host/rerun: %s", withHealth, gate.Layer, gate.Action, gate.Reason)
		}
		if g := h.GPUs[0]; g.Status != results.StatusInconclusive || g.Action != "" {
			t.Errorf("health %v: gpu 0 %s action %q, want inconclusive (not proven) and no action", withHealth, g.Status, g.Action)
		}
		if s.Status != results.StatusFlag {
			t.Errorf("health %v: run %s, want flag", withHealth, s.Status)
		}
	}
}
