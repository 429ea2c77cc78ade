package main

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/sim"
)

// The peer's p50s, computed here from its per-request arrays, are the ones it prints itself.
func TestPeerP50sMatchThePeersOwn(t *testing.T) {
	b, err := os.ReadFile("testdata/vllm-result-mock-ttft50-itl10.json")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := parsePeer(b)
	if err != nil {
		t.Fatal(err)
	}
	var own struct {
		TTFT float64 `json:"median_ttft_ms"`
		ITL  float64 `json:"median_itl_ms"`
	}
	if err := json.Unmarshal(b, &own); err != nil {
		t.Fatal(err)
	}
	if pr.Completed != 240 || len(pr.TTFTs) != 240 || len(pr.ITLs) != 240 {
		t.Fatalf("completed %d, %d ttfts, %d itls; want 240 each", pr.Completed, len(pr.TTFTs), len(pr.ITLs))
	}
	ttft, itl := pr.p50s()
	if math.Abs(ttft-own.TTFT) > 1e-9*own.TTFT || math.Abs(itl-own.ITL) > 1e-9*own.ITL {
		t.Errorf("p50s %.9f / %.9f ms, the peer's own %.9f / %.9f", ttft, itl, own.TTFT, own.ITL)
	}
	// A failed request's zero TTFT is not a sample.
	pr.TTFTs[0], pr.Errors[0] = 0, "boom"
	pr.TTFTs[1], pr.Errors[1] = 0, "boom"
	if got, _ := pr.p50s(); got == 0 || math.Abs(got-own.TTFT) > 0.05*own.TTFT {
		t.Errorf("TTFT p50 with two failed requests: %.3f ms", got)
	}
}

func TestParsePeerRefusesOtherJSON(t *testing.T) {
	for _, in := range []string{`{"runs":[]}`, `[]`, `{"ttfts": "x"}`, ``} {
		if _, err := parsePeer([]byte(in)); err == nil {
			t.Errorf("%q: accepted as a peer result", in)
		}
	}
}

// Each trace record goes to the run whose window holds its arrival; tokens count every successful
// request, the latency truth only the real ones.
func TestAttributeByWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	recs := []sim.TraceRecord{
		{Arrival: at(1), Received: at(1), Status: 200, TokenMs: []float64{10, 14, 18, 22}},
		{Arrival: at(2), Received: at(2), Status: 200, TokenMs: []float64{5}}, // calibration: tokens only
		{Arrival: at(3), Received: at(3), Status: 500},                        // refused: nothing
		{Arrival: at(12), Received: at(12), Status: 200, TokenMs: []float64{30, 40, 50}},
		{Arrival: at(12), Received: at(12), Status: 200, Fault: "cut_stream", TokenMs: []float64{30, 40, 50}},
		{Arrival: at(30), Received: at(30), Status: 200, TokenMs: []float64{1, 2, 3}}, // outside every run
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(f)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	runs := []clientRun{{client: "gpuvet", start: at(0), end: at(10)}, {client: "peer", start: at(11), end: at(20)}}
	if err := attribute(path, runs); err != nil {
		t.Fatal(err)
	}
	if runs[0].tokens != 5 || runs[1].tokens != 3 {
		t.Errorf("tokens %d / %d, want 5 / 3", runs[0].tokens, runs[1].tokens)
	}
	if runs[0].truthTTFT != 10 || runs[0].truthITL != 4 || runs[1].truthTTFT != 30 || runs[1].truthITL != 10 {
		t.Errorf("truth TTFT/ITL %v/%v and %v/%v, want 10/4 and 30/10", runs[0].truthTTFT, runs[0].truthITL, runs[1].truthTTFT, runs[1].truthITL)
	}
	// A run that got no token is an error, not a division by zero.
	runs = append(runs, clientRun{client: "peer", start: at(40), end: at(50)})
	if err := attribute(path, runs); err == nil {
		t.Error("a run with no token in its window was accepted")
	}
}

// The verdict comes from the pairs in which the simulator kept its schedule.
func TestReportVerdict(t *testing.T) {
	run := func(client string, cpuMs, tokens int, truthITL float64) clientRun {
		return clientRun{client: client, cpu: time.Duration(cpuMs) * time.Millisecond, tokens: tokens, truthITL: truthITL}
	}
	fixed := []clientRun{run("gpuvet", 10, 100, 4), run("peer", 500, 100, 4)}
	cases := []struct {
		runs []clientRun
		want string
	}{
		{[]clientRun{run("gpuvet", 1000, 200000, 4), run("peer", 6000, 200000, 4)}, "as measured): MET"},
		{[]clientRun{run("gpuvet", 1000, 200000, 4), run("peer", 4000, 200000, 4)}, "as measured): NOT met"},
		// The second pair's 2× is from a bursty server: left out.
		{[]clientRun{run("gpuvet", 1000, 200000, 4), run("peer", 6000, 200000, 4),
			run("gpuvet", 1000, 200000, 0.1), run("peer", 2000, 200000, 4)}, "as measured): MET"},
		{[]clientRun{run("gpuvet", 1000, 200000, 1), run("peer", 6000, 200000, 4)}, "as measured): undecided"},
	}
	for i, c := range cases {
		out := captureStdout(t, func() { report(fixed, c.runs, 4*time.Millisecond) })
		if !strings.Contains(out, c.want) {
			t.Errorf("case %d: want %q in\n%s", i, c.want, out)
		}
	}
}

func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	f()
	os.Stdout = old
	w.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
