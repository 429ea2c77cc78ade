package judge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// End to end without the pipeline: four simulated H200s, GPU 2 a 30 % straggler, a real fixed-
// concurrency run (aicr-style) from the load generator against each, then Apply: GPU 2 is flagged,
// and only GPU 2, for its throughput. (A sweep this short on a shared 2-core machine comes out
// truncated and client-limited, and the judge then rightly suppresses throughput flags: a fixed
// concurrency makes the test about the judge, not the machine; when even that run is client-limited,
// the straggler's cell must be inconclusive, and a healthy card is never flagged.)
func TestSimStragglerFlaggedOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four short sweeps against the simulator")
	}
	const n, straggler = 4, 2
	fleet, err := sim.NewFleet(sim.FleetConfig{GPU: "H200", Count: n, StragglerIndex: straggler, StragglerPct: 30, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := fleet.GPUs()
	if err != nil {
		t.Fatal(err)
	}
	m := results.Model{Model: testModel, Endpoints: make([]results.Endpoint, n)}
	// One GPU at a time, as the seed benchmarks them: four loads at once on a shared 2-core machine
	// would measure the machine, not the GPUs.
	for i := 0; i < n; i++ {
		srv, err := sim.Listen(sim.Config{GPU: "H200", Model: testModel, Fleet: fleet, GPUIndex: i, Seed: int64(i)}, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := load.Run(context.Background(), load.Options{URL: srv.URL(), Model: testModel, Drain: 5 * time.Second,
			Config: results.LoadConfig{Profile: "concurrency", PromptTokens: 128, OutputTokens: 32, Concurrency: 16,
				MaxDuration: results.Duration(1500 * time.Millisecond), Warmup: "1"}})
		srv.Close()
		if err != nil {
			t.Fatalf("gpu %d load: %v", i, err)
		}
		m.Endpoints[i] = results.Endpoint{GPUs: []int{i}, GPUName: infos[i].Name, Load: l}
	}
	s := &results.Summary{SchemaVersion: results.SchemaVersion, Backend: "sim",
		Hosts: []results.Host{{Name: "sim", Discovery: results.Discovery{Source: "sim", GPUs: infos}, Models: []results.Model{m}}}}
	cfg := DefaultConfig()
	cfg.Gates.TTFTP95Ms.Value, cfg.Gates.ITLP95Ms.Value = nil, nil // a concurrency profile has no synchronous rung to gate
	Apply(s, cfg)

	var why []string
	for _, fl := range s.Flags {
		why = append(why, fl.Subject+": "+fl.Reason)
		if fl.Subject != testModel+" on gpu 2" {
			t.Errorf("a healthy GPU flagged: %s: %s", fl.Subject, fl.Reason)
		}
	}
	// The straggler is flagged, unless the load generator itself was the bottleneck on this shared
	// machine: then its figure cannot show it and the cell must say so (inconclusive, never ok).
	var cell *results.CompareCell
	for _, c := range s.Hosts[0].Models[0].Comparisons {
		for i := range c.Values {
			if c.Metric == MetricConcOutputTokS && c.Values[i].GPU == straggler {
				cell = &c.Values[i]
			}
		}
	}
	switch {
	case cell == nil:
		t.Fatalf("no concurrency throughput comparison for the straggler")
	case cell.Inconclusive && strings.Contains(cell.Reason, "client-limited"):
		t.Logf("the client was the bottleneck on this machine: the straggler is inconclusive, not flagged: %s", cell.Reason)
	case !cell.Flagged:
		t.Errorf("the straggler's throughput is not flagged: %s; flags:\n%s", cell.Reason, strings.Join(why, "\n"))
	}
	for i, ep := range s.Hosts[0].Models[0].Endpoints {
		want := results.StatusOK
		if i == straggler && cell.Flagged {
			want = results.StatusFlag
		}
		if ep.Status != want {
			t.Errorf("gpu %d: %s, want %s (sustained %.1f req/s)", i, ep.Status, want, ep.Load.SustainedReqS)
		}
	}
	for _, c := range s.Hosts[0].Models[0].Comparisons {
		for _, v := range c.Values {
			t.Logf("%s gpu %d: %s", c.Metric, v.GPU, v.Reason)
		}
	}
	t.Logf("flags:\n%s", strings.Join(why, "\n"))
}
