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
// concurrency makes the test about the judge, not the machine.)
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
	Apply(s, cfg)

	var why []string
	for _, fl := range s.Flags {
		why = append(why, fl.Subject+": "+fl.Reason)
		if fl.Subject != testModel+" on gpu 2" {
			t.Errorf("a healthy GPU flagged: %s: %s", fl.Subject, fl.Reason)
		}
	}
	var thr bool
	for _, fl := range s.Flags {
		thr = thr || (fl.Check == CheckGPUToGPU && strings.HasPrefix(fl.Reason, MetricConcOutputTokS))
	}
	if !thr {
		t.Errorf("the straggler's throughput is not flagged; flags:\n%s", strings.Join(why, "\n"))
	}
	for i, ep := range s.Hosts[0].Models[0].Endpoints {
		want := results.StatusOK
		if i == straggler {
			want = results.StatusFlag
		}
		if ep.Status != want {
			t.Errorf("gpu %d: %s, want %s (sustained %.1f req/s)", i, ep.Status, want, ep.Load.SustainedReqS)
		}
	}
	t.Logf("flags:\n%s", strings.Join(why, "\n"))
}
