package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// A phase that panics after the load (here the functional suite) fails its endpoint, and what the
// endpoint measured before stays in the summary: before, the recovered panic replaced the whole
// endpoint with a bare failed one, its load, power and telemetry lost.
func TestPanicAfterTheLoadKeepsTheLoad(t *testing.T) {
	p := quick(t, "sim.gpus=1", "power.enabled=true")
	d := NewDeps(p.Config, nil, nil)
	d.Load = stubLoad
	d.Functional = func(context.Context, string, string, string, config.Config) *results.Functional {
		panic("functional suite broke")
	}
	res, err := Run(context.Background(), p, d, Options{ToolVersion: "test", Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	eps := res.Summary.Hosts[0].Models[0].Endpoints
	if len(eps) != 1 {
		t.Fatalf("endpoints: %+v", eps)
	}
	ep := eps[0]
	if ep.Status != results.StatusFailed || !strings.Contains(ep.Error, "functional suite broke") {
		t.Errorf("the panic is not the endpoint's failure: status %s, error %q", ep.Status, ep.Error)
	}
	if ep.Load == nil || ep.Load.PeakOutputTokS != 1000 || ep.URL == "" {
		t.Errorf("what the endpoint measured before the panic is lost: load %+v, url %q", ep.Load, ep.URL)
	}
}
