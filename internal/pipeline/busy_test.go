package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A co-tenant that appears on a simulated GPU during its load (issue 26): the power sampler's watch
// sees the new process, the endpoint records when and in which rung, that rung and the later ones
// are marked, and the judge flags it; the other GPU is untouched. (The co-tenant starts 3 s after
// the simulator; how far into the load that is depends on how fast the engine came up.)
func TestBusyDuringTheLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	p := quick(t, "sim.cotenant=1:3s", "functional.enabled=false", "power.interval=200ms")
	res, err := Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	h := res.Summary.Hosts[0]
	if h.Health.GPUs[1].Busy != nil {
		t.Errorf("busy at the health phase, before the co-tenant started: %+v", h.Health.GPUs[1].Busy)
	}
	eps := h.Models[0].Endpoints
	if len(eps) != 2 || len(eps[0].Busy) != 0 {
		t.Fatalf("endpoints %+v", eps)
	}
	e := eps[1]
	if len(e.Busy) != 1 || e.Busy[0].When != "during the load" || e.Busy[0].T == nil || *e.Busy[0].T <= 0 || e.Busy[0].Rung == nil ||
		!strings.Contains(e.Busy[0].Reason, "gpu 1 busy: PID 4242 python3, 8.1 GiB") {
		t.Fatalf("busy %+v (at %v s, rung %v)", e.Busy, deref(e.Busy[0].T), deref(e.Busy[0].Rung))
	}
	marked := 0
	for i, r := range e.Load.Runs {
		if r.Busy != "" {
			marked++
			if i < *e.Busy[0].Rung {
				t.Errorf("rung %d marked, before the co-tenant appeared in rung %d", i, *e.Busy[0].Rung)
			}
		}
	}
	if marked == 0 || e.Status != results.StatusFlag || eps[0].Status == results.StatusFlag {
		t.Errorf("%d rungs marked; status %s, gpu 0 %s (%+v)", marked, e.Status, eps[0].Status, eps[0].Flags)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
