package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/metrics"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// traceDists reads the simulator's ground truth: TTFT (request received -> first token) and per-token ITL.
func traceDists(t testing.TB, trace []byte) (ttft, itl results.Dist, n int) {
	t.Helper()
	var tt, it []float64
	sc := bufio.NewScanner(bytes.NewReader(trace))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var r sim.TraceRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("trace: %v", err)
		}
		if r.Status != 200 || len(r.TokenMs) == 0 || r.Fault != "" {
			continue
		}
		n++
		tt = append(tt, r.TTFTMs())
		for i := 1; i < len(r.TokenMs); i++ {
			it = append(it, r.TokenMs[i]-r.TokenMs[i-1])
		}
	}
	return metrics.Summarize(tt), metrics.Summarize(it), n
}

func TestAgainstSimFixedMode(t *testing.T) {
	var trace bytes.Buffer
	srv, err := sim.Listen(sim.Config{Model: testModel, TTFT: 30 * time.Millisecond, ITL: 3 * time.Millisecond, Trace: &trace}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := opts(srv.URL(), results.LoadConfig{Profile: "concurrency", Concurrency: 8, MaxRequests: 40, PromptTokens: 200, OutputTokens: 30})
	o.ScrapeMetrics = true
	o.ScrapeEvery = 50 * time.Millisecond
	l, err := Run(context.Background(), o)
	srv.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := l.Runs[0]
	if r.Requests.Successful != 40 || l.TokenCounts != tokensServer || l.OutputCounts != countsContinuous {
		t.Fatalf("requests %+v counts %q/%q errors %v", r.Requests, l.TokenCounts, l.OutputCounts, r.Errors)
	}
	if r.MeanPromptTokens != 200 || r.MeanOutputTokens != 30 {
		t.Fatalf("prompt %v output %v tokens, want exactly 200 and 30", r.MeanPromptTokens, r.MeanOutputTokens)
	}
	tt, it, n := traceDists(t, trace.Bytes())
	if n != 42 { // 40 measured + 1 warm-up + 1 parameter negotiation
		t.Fatalf("trace has %d requests, want 42", n)
	}
	// Loose here (a shared machine); the fidelity benchmark holds the tight figures.
	near(t, "TTFT p50 − trace", r.TTFT.P50, tt.P50, 3)
	near(t, "ITL p50 − trace", r.ITL.P50, it.P50, 1)
	if l.Server == nil || l.Server.Error != "" || len(l.Server.Samples) == 0 {
		t.Fatalf("sim /metrics not scraped: %+v", l.Server)
	}
}

func TestSimSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	srv, err := sim.Listen(sim.Config{GPU: "H100", Model: testModel}, "127.0.0.1:0")
	if err != nil {
		t.Skipf("sim has no roofline for %s/H100: %v", testModel, err)
	}
	defer srv.Close()
	o := opts(srv.URL(), results.LoadConfig{Profile: "sweep", MaxConcurrency: 32, Rates: 5, MaxDuration: results.Duration(2 * time.Second), PromptTokens: 128, OutputTokens: 32})
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if l.Saturation == nil || l.Saturation.Knee == nil || len(l.Saturation.Knee.Probes) == 0 {
		t.Fatalf("%d runs, saturation %+v: no knee search recorded", len(l.Runs), l.Saturation)
	}
	k := l.Saturation.Knee
	if want := 1 + len(k.Probes) + 5 + k.ClimbedRungs; len(l.Runs) != want {
		t.Fatalf("%d runs, want synchronous + %d probes + 5 rungs + %d climbed", len(l.Runs), len(k.Probes), k.ClimbedRungs)
	}
	for i, p := range k.Probes[1:] { // each probe doubles the last, up to the limit
		if p.Concurrency != min(2*k.Probes[i].Concurrency, k.Limit) {
			t.Fatalf("probes %+v do not double up to %d", k.Probes, k.Limit)
		}
	}
	t.Logf("knee: %+v", k)
	if len(k.Probes) < 2 || k.Reason == "" || k.LadderTopReqS <= 0 {
		t.Fatalf("knee %+v: no reason or ladder top", k)
	}
	if l.Runs[1].OutputTokS <= l.Runs[0].OutputTokS {
		t.Fatalf("probe %v tok/s not above synchronous %v", l.Runs[1].OutputTokS, l.Runs[0].OutputTokS)
	}
}
