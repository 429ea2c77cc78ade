package load

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A synchronous rung runs past max_duration until min_samples requests completed.
func TestSyncRungSizedByCompletions(t *testing.T) {
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 4 * time.Millisecond, usage: "continuous"}
	s := f.start(t)
	l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: kindSynchronous, OutputTokens: 100,
		MaxDuration: results.Duration(500 * time.Millisecond), MinSamples: 6, MaxRungDuration: results.Duration(30 * time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	r := l.Runs[0]
	if r.Requests.Successful < 6 || r.Sizing == nil || r.Sizing.Cut || r.TTFT.Count < 6 {
		t.Fatalf("requests %+v sizing %+v: want ≥ 6 completed, not cut", r.Requests, r.Sizing)
	}
	if r.Sizing.ShortRequests != 0 {
		t.Errorf("a synchronous profile shortened %d requests: only a sweep's synchronous rung may", r.Sizing.ShortRequests)
	}
}

// The cut-rung rule in the load generator: the cap ends a rung short of its samples, and it says so.
func TestRungCutByMaxRungDuration(t *testing.T) {
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 4 * time.Millisecond, usage: "continuous"}
	s := f.start(t)
	l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: kindSynchronous, OutputTokens: 100,
		MaxDuration: results.Duration(300 * time.Millisecond), MinSamples: 500, MaxRungDuration: results.Duration(1500 * time.Millisecond)}))
	if err != nil {
		t.Fatal(err)
	}
	r := l.Runs[0]
	if r.Sizing == nil || !r.Sizing.Cut || !strings.Contains(r.Sizing.Reason, "load.max_rung_duration") || r.CutReason() == "" {
		t.Fatalf("sizing %+v: want cut, naming load.max_rung_duration", r.Sizing)
	}
	if r.WindowSeconds < 0.8 || r.WindowSeconds > 3 { // the warm-up request comes first
		t.Errorf("window %.2f s: want about the 1.5 s cap", r.WindowSeconds)
	}
}

// A slow engine (each request outlasts max_duration many times) is measured, not failed, and its
// probe is measured in its steady state: it completed nothing in its first half second, which is
// no knee (the old rule's finding), so it ran on until its requests turned over in a level window.
// The synchronous rung gets its samples from shorter requests with the same prompt.
func TestSweepOnASlowEngineWaitsForItsSteadyState(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel() // waits on a slow engine: its wall time, not the CPU's
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 10 * time.Millisecond, usage: "continuous", capacity: make(chan struct{}, 16)}
	s := f.start(t)
	o := opts(s.URL, results.LoadConfig{Profile: "sweep", MaxConcurrency: 16, Rates: 2, OutputTokens: 300,
		MaxDuration: results.Duration(500 * time.Millisecond), MinSamples: 10, MaxRungDuration: results.Duration(60 * time.Second)})
	o.MaxNumSeqs = 16 // the knee search stays at the first probe
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("a slow engine failed the sweep: %v", err)
	}
	sync, probe := l.Runs[0], l.Runs[1]
	if sync.Requests.Successful < 10 || sync.Sizing == nil || sync.Sizing.Cut || sync.Sizing.ShortRequests == 0 || sync.Sizing.ShortOutputTokens >= 300 {
		t.Errorf("sync requests %+v sizing %+v: want ≥ 10 completed, the later ones shorter", sync.Requests, sync.Sizing)
	}
	st := probe.Steady
	if probe.Kind != kindThroughput || st == nil || st.Transient || probe.Requests.Successful < levelMinDone || st.OnsetS+probe.WindowSeconds < 3 {
		t.Fatalf("probe %s requests %+v window %.1f s steady %+v: want it run on past its 3 s requests until they turned over in a level window",
			probe.Kind, probe.Requests, probe.WindowSeconds, st)
	}
	if sat := l.Saturation; sat == nil || sat.Knee == nil || strings.Contains(sat.Knee.Reason, "completed no request") || len(sat.Knee.Probes) != 1 {
		t.Fatalf("saturation %+v: nothing completed in a short window is no knee", sat)
	}
	if len(l.Runs) < 4 || l.SustainedReqS <= 0 || l.PeakOutputTokS <= 0 {
		t.Errorf("%d runs, sustained %v, peak %v", len(l.Runs), l.SustainedReqS, l.PeakOutputTokS)
	}
}

// The knee search does not start a probe that could not level within load.max_rung_duration: at
// twice the concurrency a request takes up to twice as long (2 s at 16 streams here, so about 4 s
// at 32, past a 4 s cap), and such a probe would only spend the cap to end transient.
func TestKneeSearchSkipsAProbeThatCouldNotLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel() // waits on a slow engine: its wall time, not the CPU's
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 10 * time.Millisecond, usage: "continuous"}
	s := f.start(t)
	o := opts(s.URL, results.LoadConfig{Profile: "sweep", MaxConcurrency: 16, Rates: 1, OutputTokens: 200,
		MaxDuration: results.Duration(500 * time.Millisecond), MinSamples: 3, MaxRungDuration: results.Duration(4 * time.Second)})
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	k := l.Saturation.Knee
	if l.Runs[1].TransientReason() != "" || len(k.Probes) != 1 || !strings.Contains(k.Reason, "could not level") {
		t.Errorf("probe %+v, knee %+v: want the first probe steady and no second one", l.Runs[1].Steady, k)
	}
}

// A probe's queue median rests on enough /metrics samples: one scrape caught as requests arrived
// (3 of 4 waiting, on a server with room for 64) is an instant, not a full batch, so the search
// goes on doubling (seen on the simulator: "the server queued a median of 3 requests at concurrency
// 4: its batch is full" on an engine of 32 sequences, its sweep then a lower bound).
func TestKneeQueueNeedsSamples(t *testing.T) {
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: time.Millisecond, usage: "continuous", capacity: make(chan struct{}, 64), waitingGauge: 3}
	s := f.start(t)
	o := opts(s.URL, results.LoadConfig{Profile: "sweep", MaxConcurrency: 4, Rates: 2, MaxDuration: results.Duration(600 * time.Millisecond)})
	o.ScrapeMetrics, o.ScrapeEvery, o.MaxNumSeqs = true, 400*time.Millisecond, 8
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	k := l.Saturation.Knee
	if strings.Contains(k.Reason, "batch is full") || len(k.Probes) < 2 {
		t.Fatalf("knee %+v: one or two scrapes of 3 waiting were read as a full batch", k)
	}
}

// A queue the server holds through the probe is a full batch: 16 streams at a server that
// generates 8 at once, scraped often enough, stop the search at the first probe.
func TestKneeSteadyQueueIsAFullBatch(t *testing.T) {
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 2 * time.Millisecond, usage: "continuous", capacity: make(chan struct{}, 8)}
	s := f.start(t)
	o := opts(s.URL, results.LoadConfig{Profile: "sweep", MaxConcurrency: 16, Rates: 2, MaxDuration: results.Duration(time.Second)})
	o.ScrapeMetrics, o.ScrapeEvery = true, 50*time.Millisecond
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	k := l.Saturation.Knee
	if !k.PastKnee || !strings.Contains(k.Reason, "batch is full") || len(k.Probes) != 1 {
		t.Fatalf("knee %+v: a steady queue of 8 at concurrency 16 is a full batch", k)
	}
}
