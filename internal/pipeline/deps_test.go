package pipeline

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// remoteSource is a host's GPUs seen from elsewhere (as a Kubernetes node is): a note, no samples.
type remoteSource struct{ Source }

func (remoteSource) Note() string      { return "seen through an API" }
func (remoteSource) Unsampled() string { return "the GPUs are out of reach" }

// oneEndpoint serves every GPU through one engine (as Kubernetes with Dynamo does).
type oneEndpoint struct{ Backend }

func (oneEndpoint) Group(gpus []results.GPUInfo, tp int) ([]Slot, string) {
	s := Slot{NUMANode: -1, GPUName: gpus[0].Name}
	for _, g := range gpus {
		s.GPUs = append(s.GPUs, g.Index)
	}
	return []Slot{s}, ""
}

// Issue 29: what a backend whose hosts gpuvet cannot reach needs of the host pipeline, each a Dep or
// an optional interface rather than a branch on the backend's name: the source's note is the
// discovery's; an unsampled source gets no power record and a telemetry record saying why; no Warmup
// means no warm-up; the functional suite is the Dep's; a load that brought its own concurrency run
// is not run again for aicr's gates; a Grouper makes the slots.
func TestDepsForARemoteHost(t *testing.T) {
	t.Parallel()
	p := quick(t, "load.profile=synchronous", "gates.aicr_max_ttft_p99_ms=5000")
	deps := NewDeps(p.Config, nil, nil)
	disc := deps.Discover
	deps.Discover = func(ctx context.Context, c config.Config) (Source, string, error) {
		src, name, err := disc(ctx, c)
		return remoteSource{src}, name, err
	}
	deps.Backend = oneEndpoint{deps.Backend}
	deps.Warmup = nil
	var loads, functionals atomic.Int32
	load := deps.Load
	deps.Load = func(ctx context.Context, url, model, key string, lc results.LoadConfig, rec string) (*results.Load, error) {
		loads.Add(1)
		ld, err := load(ctx, url, model, key, lc, rec)
		if ld != nil && len(ld.Runs) > 0 { // as a Kubernetes load Job's: the whole plan, aicr's run included
			c := ld.Runs[0]
			c.Kind = "concurrency"
			ld.Runs = append(ld.Runs, c)
		}
		return ld, err
	}
	deps.Functional = func(context.Context, string, string, string, config.Config) *results.Functional {
		functionals.Add(1)
		return &results.Functional{Status: results.StatusOK, Tests: []results.FunctionalTest{{Name: "from the dep", Passed: true}}}
	}
	res, err := Run(context.Background(), p, deps, Options{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	h := res.Summary.Hosts[0]
	if h.Discovery.Note != "seen through an API" {
		t.Errorf("discovery note %q", h.Discovery.Note)
	}
	if len(h.Models) != 1 || len(h.Models[0].Endpoints) != 1 {
		t.Fatalf("models %+v: want one endpoint over both GPUs", h.Models)
	}
	ep := h.Models[0].Endpoints[0]
	if len(ep.GPUs) != 2 || ep.Error != "" || ep.Load == nil {
		t.Fatalf("endpoint gpus %v, error %q", ep.GPUs, ep.Error)
	}
	if ep.Power != nil || ep.Telemetry == nil || ep.Telemetry.Note != "not sampled: the GPUs are out of reach" || len(ep.Telemetry.GPUs) != 0 {
		t.Errorf("power %+v, telemetry %+v: want no samples and the reason", ep.Power, ep.Telemetry)
	}
	if ep.Timing == nil || ep.Timing.WarmupSeconds > 0.5 {
		t.Errorf("timing %+v: no Warmup dep, no warm-up", ep.Timing)
	}
	if loads.Load() != 1 || functionals.Load() != 1 || ep.Functional == nil || ep.Functional.Tests[0].Name != "from the dep" {
		t.Errorf("%d loads (want 1: the load had its concurrency run), %d functional suites, functional %+v", loads.Load(), functionals.Load(), ep.Functional)
	}
}
