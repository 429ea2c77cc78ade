package load

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/analysis"
	"github.com/gpuvet/gpuvet/internal/dataset"
	"github.com/gpuvet/gpuvet/internal/results"
)

const testModel = "Qwen/Qwen3-8B"

func opts(url string, c results.LoadConfig) Options {
	if c.PromptTokens == 0 {
		c.PromptTokens = 64
	}
	if c.OutputTokens == 0 {
		c.OutputTokens = 20
	}
	if c.Reader == "" {
		c.Reader = testReader
	}
	return Options{URL: url, Model: testModel, Config: c, Drain: 5 * time.Second}
}

// testReader is the reader the tests' loads use (auto: the event loop here); TestNetHTTPReader runs
// the scenario tests again with net/http.
var testReader = ReaderAuto

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.3f, want %.3f ± %.3f", what, got, want, tol)
	}
}

// The fake's timing is exact on the server side; the client adds scheduling noise of well under a
// millisecond on an idle machine, but this machine is shared, so tolerances here are loose: the
// fidelity benchmark holds the tight figures.
func TestSynchronousMeasuresTTFTAndITL(t *testing.T) {
	for _, c := range []struct {
		name, usage, api string
		perChunk         int
		counts           string
	}{
		{"one token per chunk, continuous usage", "continuous", "chat", 1, countsContinuous},
		{"four tokens per chunk, continuous usage", "continuous", "chat", 4, countsContinuous},
		{"four tokens per chunk, final usage only", "final", "completions", 4, countsUsageSplit},
		{"one token per chunk, final usage only", "final", "chat", 1, countsUsage},
		{"no usage at all", "none", "chat", 1, countsChunks},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fake{model: testModel, ttft: 40 * time.Millisecond, itl: 4 * time.Millisecond, perChunk: c.perChunk, roleChunk: true, usage: c.usage}
			s := f.start(t)
			l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: "synchronous", API: c.api, MaxRequests: 4}))
			if err != nil {
				t.Fatal(err)
			}
			r := l.Runs[0]
			if r.Requests.Successful != 4 || r.Requests.Warmup != 1 || r.Requests.Errored != 0 {
				t.Fatalf("requests %+v errors %v", r.Requests, r.Errors)
			}
			near(t, "TTFT p50", r.TTFT.P50, 40, 8)
			if r.TTFT.P50 < 40 {
				t.Errorf("TTFT %.2f ms below the server's 40 ms: the role-only chunk was counted?", r.TTFT.P50)
			}
			near(t, "ITL p50", r.ITL.P50, 4, 1.5)
			near(t, "TPOT p50", r.TPOT.P50, 4, 1.5)
			near(t, "E2E p50", r.E2E.P50, 40+19*4, 15)
			// Tokens after the first chunk each give one ITL sample (a k-token chunk gives k of gap/k).
			if want := 4 * (20 - c.perChunk); r.ITL.Count != want {
				t.Errorf("ITL samples %d, want %d", r.ITL.Count, want)
			}
			if r.MeanOutputTokens != 20 || l.OutputCounts != c.counts {
				t.Errorf("mean output %v counts %q, want 20 %q", r.MeanOutputTokens, l.OutputCounts, c.counts)
			}
			if l.TokenCounts != tokensServer {
				t.Errorf("token counts %q", l.TokenCounts)
			}
			if r.OutputTokS <= 0 || r.ReqS <= 0 || r.WindowSeconds <= 0 || r.TTFTFromSchedule != nil {
				t.Errorf("throughput %+v", r)
			}
		})
	}
}

func TestExactPromptLengths(t *testing.T) {
	f := &fake{model: testModel, ttft: time.Millisecond, itl: time.Millisecond, usage: "continuous", overhead: 9}
	s := f.start(t)
	l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: "concurrency", Concurrency: 4, MaxRequests: 20, PromptTokens: 300}))
	if err != nil {
		t.Fatal(err)
	}
	if r := l.Runs[0]; r.MeanPromptTokens != 300 {
		t.Fatalf("mean prompt tokens %v (server count, template included), want exactly 300", r.MeanPromptTokens)
	}
	f.noTokenize = true
	l, err = Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: "concurrency", Concurrency: 4, MaxRequests: 20, PromptTokens: 300}))
	if err != nil {
		t.Fatal(err)
	}
	if l.TokenCounts != tokensUsage || math.Abs(l.Runs[0].MeanPromptTokens-300) > 3 {
		t.Fatalf("usage-calibrated: %q mean %v", l.TokenCounts, l.Runs[0].MeanPromptTokens)
	}
}

func TestErrorsAreClassifiedNotFatal(t *testing.T) {
	cases := []struct {
		name  string
		f     *fake
		class string
	}{
		{"malformed chunk", &fake{malformed: 3}, errMalformed},
		{"cut stream", &fake{cutAfter: 5}, errCut},
		{"no [DONE] and no finish", &fake{noDone: true}, errCut},
		{"HTTP 429", &fake{status: 429}, "http_429"},
		{"HTTP 500", &fake{status: 500}, "http_500"},
		{"short output", &fake{short: 3}, errShort},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.f
			f.model, f.ttft, f.itl, f.usage, f.perChunk = testModel, 2*time.Millisecond, time.Millisecond, "continuous", 1
			s := f.start(t)
			l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: "concurrency", Concurrency: 3, MaxRequests: 6, Warmup: "0"}))
			if err == nil || l == nil {
				t.Fatalf("want an error with the measured load, got %v, %v", l, err)
			}
			r := l.Runs[0]
			if r.Errors[c.class] != 6 || r.Requests.Errored != 6 || r.Requests.Successful != 0 {
				t.Fatalf("errors %v requests %+v, want 6 × %s", r.Errors, r.Requests, c.class)
			}
		})
	}
}

func TestConnectError(t *testing.T) {
	f := &fake{model: testModel}
	s := f.start(t)
	url := s.URL
	o := opts(url, results.LoadConfig{Profile: "synchronous", MaxRequests: 2})
	cl := &client{hc: newHTTPClient(1, nil), endpoint: "http://127.0.0.1:1/v1/chat/completions", chat: true, model: testModel, reqTimeout: time.Second, stall: time.Second, epoch: time.Now()}
	rec := &Record{}
	cl.do(context.Background(), promptOf("hi"), 5, rec)
	if rec.Error != errConnect {
		t.Fatalf("class %q (%s), want connect", rec.Error, rec.Detail)
	}
	_ = o
}

// TestStallTimeoutIsTheCeiling: a stream silent for the stall timeout (the most silence ever allowed,
// whatever the load's pace) has stalled; silence before the first token is not a stall.
func TestStallTimeoutIsTheCeiling(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	f := &fake{model: testModel, ttft: 300 * time.Millisecond, itl: time.Millisecond, usage: "continuous", roleChunk: true, pauseAfter: 2, pause: time.Minute}
	s := f.start(t)
	cl := &client{hc: newHTTPClient(1, nil), endpoint: s.URL + "/v1/chat/completions", chat: true, model: testModel, reqTimeout: time.Minute, stall: 200 * time.Millisecond, epoch: time.Now()}
	if testReader != ReaderNetHTTP {
		ev, err := newEvReader(cl, endpointURL{addr: strings.TrimPrefix(s.URL, "http://"), host: strings.TrimPrefix(s.URL, "http://"), uri: "/v1/chat/completions"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer ev.close()
		cl.ev = ev
	}
	rec := &Record{}
	cl.do(context.Background(), promptOf("hi"), 5, rec)
	if rec.Error != errStalled || rec.OutputTokens != 2 {
		t.Fatalf("class %q (%s), %d tokens, want stalled after 2", rec.Error, rec.Detail, rec.OutputTokens)
	}
}

func TestOpenLoopConstant(t *testing.T) {
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: time.Millisecond, usage: "continuous"}
	s := f.start(t)
	l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: "constant", Rate: 40, MaxDuration: results.Duration(time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	r := l.Runs[0]
	n := r.Requests.Successful + r.Requests.Warmup
	if n < 36 || n > 41 || r.TargetRate != 40 {
		t.Fatalf("%d requests at 40 req/s over 1 s", n)
	}
	if r.TTFTFromSchedule == nil || r.TTFTFromSchedule.Count != r.TTFT.Count || r.TTFTFromSchedule.P50 < r.TTFT.P50 {
		t.Fatalf("TTFT from schedule %+v vs TTFT %+v", r.TTFTFromSchedule, r.TTFT)
	}
	if r.ClientLag.Count == 0 || l.Client.Cores < 1 {
		t.Fatalf("no self-check: %+v %+v", r.ClientLag, l.Client)
	}
}

func TestInterruptKeepsMeasurements(t *testing.T) {
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 2 * time.Millisecond, usage: "continuous"}
	s := f.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	rec := filepath.Join(t.TempDir(), "r.jsonl")
	o := opts(s.URL, results.LoadConfig{Profile: "concurrency", Concurrency: 4, MaxDuration: results.Duration(time.Minute)})
	o.RecordsPath = rec
	start := time.Now()
	l, err := Run(ctx, o)
	if time.Since(start) > 5*time.Second {
		t.Fatalf("interrupt took %v", time.Since(start))
	}
	if err != nil || l == nil || !l.Interrupted {
		t.Fatalf("load %v err %v", l, err)
	}
	r := l.Runs[0]
	if r.Requests.Successful < 10 || r.WindowSeconds > 1 {
		t.Fatalf("interrupted run kept %+v window %v", r.Requests, r.WindowSeconds)
	}
	if lines := countLines(t, rec); lines < r.Requests.Successful {
		t.Fatalf("records has %d lines for %d requests", lines, r.Requests.Successful)
	}
}

// Not parallel: the ladder's foot is the synchronous rung's first block's rate and must match its
// three blocks' within 10 %, which a CPU shared with the parallel tests spreads (19.3 against 17.4
// req/s in CI, 2026-12-06). TestRetryKeepsBetterCurve, TestSweepClimbsPastAnUnderReadProbe and the
// two TestKnee… tests of sizing_test.go time a fake server too, and stay sequential with it as a
// precaution: they passed the one CI run in which they were parallel.
func TestSweepAndRecords(t *testing.T) {
	// Capacity 8: the probe at 16 streams saturates, constant rungs climb toward it.
	f := &fake{model: testModel, ttft: 10 * time.Millisecond, itl: 2 * time.Millisecond, usage: "continuous", capacity: make(chan struct{}, 8)}
	s := f.start(t)
	dir := t.TempDir()
	o := opts(s.URL, results.LoadConfig{Profile: "sweep", MaxConcurrency: 16, Rates: 5, MaxDuration: results.Duration(600 * time.Millisecond)})
	o.RecordsPath = filepath.Join(dir, "records.jsonl")
	o.ScrapeMetrics = true
	o.ScrapeEvery = 100 * time.Millisecond
	o.SLO = analysis.SLO{TTFT: 200 * time.Millisecond}
	// A caller lining blocks up (GPUs loaded at once) holds block 2 for 300 ms: the block starts after.
	var blocks []int
	var held time.Time
	o.BeforeBlock = func(_ context.Context, b int) {
		blocks = append(blocks, b)
		if b == 2 {
			time.Sleep(300 * time.Millisecond)
			held = time.Now()
		}
	}
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 3}; !slices.Equal(blocks, want) || SyncBlocks != len(want) {
		t.Fatalf("BeforeBlock called for blocks %v, want %v", blocks, want)
	}
	if rp := l.Runs[0].Repeat; rp == nil || len(rp.WindowStartS) != SyncBlocks || l.StartedAt.Add(time.Duration(rp.WindowStartS[1]*float64(time.Second))).Before(held) {
		t.Fatalf("block 2 measured before its caller let it start (released %v after the load's start): %+v", held.Sub(l.StartedAt), rp)
	}
	if l.Saturation == nil || l.Saturation.Knee == nil {
		t.Fatalf("saturation %+v: no knee search", l.Saturation)
	}
	k := l.Saturation.Knee
	probes := len(k.Probes)
	if len(l.Runs) != 1+probes+5+k.ClimbedRungs || l.Runs[0].Kind != kindSynchronous || l.Runs[1].Kind != kindThroughput || l.Runs[1].Concurrency != 16 {
		t.Fatalf("runs: %d (knee %+v)", len(l.Runs), k)
	}
	best := l.Runs[1]
	for _, r := range l.Runs[1 : 1+probes] {
		if r.Kind != kindThroughput {
			t.Fatalf("probe of kind %s", r.Kind)
		}
		if r.OutputTokS > best.OutputTokS {
			best = r
		}
	}
	ex := &executor{cfg: Defaults(o.Config)}
	syncRate := k.LadderFootReqS // the first block's: the rung's figures are over all three
	if r := ex.rungRate(l.Runs[0]); math.Abs(syncRate-r) > 0.1*r {
		t.Fatalf("ladder foot %v, the synchronous rung's rate over its blocks %v", syncRate, r)
	}
	top := kneeOvershoot * ex.rungRate(best) // the planned top; climbing rungs go on at the same spacing
	if want := top + float64(k.ClimbedRungs)*(top-syncRate)/5; math.Abs(k.LadderTopReqS-want) > 1e-9 || k.Concurrency != best.Concurrency {
		t.Fatalf("ladder top %v at concurrency %d, want %v past the best probe (c=%d)", k.LadderTopReqS, k.Concurrency, want, best.Concurrency)
	}
	for i, r := range l.Runs[1+probes:] {
		want := syncRate + (top-syncRate)*float64(i+1)/5
		if r.Kind != kindConstant || math.Abs(r.TargetRate-want) > 1e-9 {
			t.Fatalf("rung %d: %s at %v, want constant at %v", i, r.Kind, r.TargetRate, want)
		}
		if r.Goodput == nil {
			t.Fatal("no goodput with an SLO")
		}
	}
	if len(l.Saturation.Rungs) != 5+k.ClimbedRungs || l.Saturation.Peak != best.OutputTokS {
		t.Fatalf("saturation %+v", l.Saturation)
	}
	if l.PeakOutputTokS <= 0 || math.Abs(l.SustainedReqS-l.PeakOutputTokS/20) > 1e-6 {
		t.Fatalf("peak %v sustained %v", l.PeakOutputTokS, l.SustainedReqS)
	}
	total := 0
	for _, r := range l.Runs {
		total += r.Requests.Successful + r.Requests.Warmup + r.Requests.Errored + r.Requests.Incomplete
	}
	if n := countLines(t, o.RecordsPath); n != total {
		t.Fatalf("records: %d lines, %d requests", n, total)
	}
	if l.Server == nil || len(l.Server.Samples) < 5 || l.Server.Error != "" {
		t.Fatalf("server metrics %+v", l.Server)
	}
	maxRun := 0.0
	for _, s := range l.Server.Samples {
		maxRun = max(maxRun, s.Running)
	}
	if maxRun < 2 || maxRun > 8 {
		t.Fatalf("scraped running peaked at %v, want 2..8", maxRun)
	}
	if l.Runs[1].CI == nil || l.Runs[1].CI.ITLP95 == nil || l.Runs[1].CI.TPOTP50 == nil {
		t.Fatalf("no CI on the probe: %+v", l.Runs[1].CI)
	}
	// A tail percentile gets an interval only from enough samples to bound it (72 for a p95): the
	// requests sent in the window, not the ramp's that Successful counts too (with the machine busy
	// the probe levels later, and 84 successful requests once held fewer than 72 samples).
	if n := l.Runs[1].TTFT.Count; (n >= 72) != (l.Runs[1].CI.TTFTP95 != nil) {
		t.Fatalf("probe of %d TTFT samples (%d successful): TTFT p95 interval %+v", n, l.Runs[1].Requests.Successful, l.Runs[1].CI.TTFTP95)
	}
}

func TestRetryKeepsBetterCurve(t *testing.T) {
	// A fake whose capacity grows between attempts: the ladder stays linear below a far probe.
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 2 * time.Millisecond, usage: "continuous"}
	s := f.start(t)
	o := opts(s.URL, results.LoadConfig{Profile: "sweep", MaxConcurrency: 4, Rates: 5, MaxDuration: results.Duration(300 * time.Millisecond)})
	o.RetryUnsaturated = true
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if l.Saturation.Unsaturated != l.Retried {
		t.Fatalf("unsaturated %v but retried %v", l.Saturation.Unsaturated, l.Retried)
	}
	if l.Retried && (l.KeptAttempt < 1 || l.KeptAttempt > 2) {
		t.Fatalf("kept attempt %d", l.KeptAttempt)
	}
}

func TestValidate(t *testing.T) {
	good := Options{URL: "http://127.0.0.1:8000", Model: "m"}
	if err := Validate(good); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := []struct {
		mut  func(*Options)
		want string
	}{
		{func(o *Options) { o.URL = "" }, "--url"},
		{func(o *Options) { o.URL = "127.0.0.1:8000" }, "--url"},
		{func(o *Options) { o.Model = "" }, "--model"},
		{func(o *Options) { o.Config.Profile = "burst" }, "unknown"},
		{func(o *Options) { o.Config.Profile = "constant" }, "--rate"},
		{func(o *Options) { o.Config.Profile = "poisson"; o.Config.Rate = -1 }, "--rate"},
		{func(o *Options) { o.Config.Profile = "concurrency" }, "--concurrency"},
		{func(o *Options) { o.Config.Concurrency = -2 }, "--concurrency"},
		{func(o *Options) { o.Config.MaxConcurrency = -1 }, "--max-concurrency"},
		{func(o *Options) { o.Config.Rates = 1000 }, "--rates"},
		{func(o *Options) { o.Config.API = "grpc" }, "--api"},
		{func(o *Options) { o.Config.Warmup = "soon" }, "--warmup"},
		{func(o *Options) { o.Config.OutputTokens = -1 }, "--output-tokens"},
		{func(o *Options) { o.Config.PromptTokens = -5 }, "prompt tokens"},
		{func(o *Options) { o.Config.Data = "/nonexistent/prompts.jsonl" }, "--data"},
		{func(o *Options) { o.TokenizerPath = "tokenizer.json" }, "--tokenizer"},
		{func(o *Options) { o.Config.MaxDuration = results.Duration(-time.Second) }, "--max-duration"},
		{func(o *Options) { o.Config.Profile = "concurrency"; o.Config.Concurrency = math.MaxInt64 }, "--concurrency"},
		{func(o *Options) { o.Config.MaxConcurrency = math.MaxInt }, "--max-concurrency"},
		{func(o *Options) { o.Config.Profile = "constant"; o.Config.Rate = math.Inf(1) }, "--rate"},
		{func(o *Options) { o.Config.Profile = "constant"; o.Config.Rate = math.NaN() }, "--rate"},
		{func(o *Options) { o.Config.OutputTokens = math.MaxInt32 }, "--output-tokens"},
		{func(o *Options) { o.Config.MaxRequests = math.MaxInt64 }, "--max-requests"},
		{func(o *Options) { o.Config.MaxDuration = results.Duration(math.MaxInt64) }, "--max-duration"},
		{func(o *Options) { o.Config.Warmup = "9223372036854775807" }, "--warmup"},
		{func(o *Options) { o.MaxInFlight = math.MaxInt }, "max in flight"},
		{func(o *Options) { o.Config.MaxRungDuration = results.Duration(math.MaxInt64) }, "--max-rung-duration"},
		{func(o *Options) { o.Config.MinSamples = math.MaxInt64 }, "min samples"},
	}
	for _, b := range bad {
		o := good
		b.mut(&o)
		if err := Validate(o); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", o.Config, err, b.want)
		}
	}
}

func TestPreflight(t *testing.T) {
	f := &fake{model: testModel}
	s := f.start(t)
	if err := Preflight(context.Background(), Options{URL: s.URL + "/v1/", Model: testModel}); err != nil {
		t.Fatal(err)
	}
	if err := Preflight(context.Background(), Options{URL: s.URL, Model: "other/model"}); err == nil || !strings.Contains(err.Error(), testModel) {
		t.Fatalf("unlisted model: %v", err)
	}
	if err := Preflight(context.Background(), Options{URL: "http://127.0.0.1:1", Model: testModel}); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("dead endpoint: %v", err)
	}
}

// Finding 5 of issue 43: a base URL's query stays on every path appended to it (it was appended
// after the query: /v1/models went into the query string, and such a URL never worked).
func TestAPIURLKeepsTheQuery(t *testing.T) {
	for _, c := range [][3]string{
		{"http://h:8000", "/v1/models", "http://h:8000/v1/models"},
		{"http://h:8000/v1/", "/tokenize", "http://h:8000/tokenize"},
		{"http://h/gw/v1?api-version=2&x=1", "/v1/chat/completions", "http://h/gw/v1/chat/completions?api-version=2&x=1"},
		{"http://h/?k=v#frag", "/metrics", "http://h/metrics?k=v"},
	} {
		if got := results.JoinURL(c[0], c[1]); got != c[2] {
			t.Errorf("results.JoinURL(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
	var gotQuery string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotQuery = r.URL.RawQuery
		if r.URL.Path != "/v1/models" || r.URL.Query().Get("api-version") != "2" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"data":[{"id":%q}]}`, testModel)
	}))
	defer s.Close()
	if err := Preflight(context.Background(), Options{URL: s.URL + "/?api-version=2", Model: testModel}); err != nil {
		t.Fatalf("a base URL with a query: %v (the server saw query %q)", err, gotQuery)
	}
}

func TestAPIKeyFromEnvOnly(t *testing.T) {
	t.Setenv("GPUVET_TEST_KEY", "sekret")
	got := ""
	f := &fake{model: testModel}
	s := f.start(t)
	cl := &client{hc: newHTTPClient(1, nil), endpoint: s.URL + "/v1/chat/completions", chat: true, model: testModel, key: apiKey("GPUVET_TEST_KEY"), reqTimeout: time.Second, stall: time.Second, epoch: time.Now()}
	got = cl.key
	if got != "sekret" {
		t.Fatalf("key %q", got)
	}
	b := cl.body(promptOf("hi"), 7)
	if strings.Contains(string(b), "sekret") {
		t.Fatal("key in the body")
	}
	var req map[string]any
	json.Unmarshal(b, &req)
	if req["max_tokens"] != 7.0 || req["min_tokens"] != 7.0 || req["ignore_eos"] != true || req["stream"] != true {
		t.Fatalf("body does not ask for exact lengths: %s", b)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	n := 0
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("records line %d: %v", n+1, err)
		}
		n++
	}
	return n
}

func promptOf(s string) dataset.Prompt { return dataset.Prompt{Text: s} }

func TestPoissonIsSeeded(t *testing.T) {
	f := &fake{model: testModel, ttft: time.Millisecond, itl: time.Millisecond, usage: "continuous"}
	s := f.start(t)
	gaps := func(seed int64) []float64 {
		o := opts(s.URL, results.LoadConfig{Profile: "poisson", Rate: 60, MaxRequests: 30, OutputTokens: 4, Seed: seed})
		o.RecordsPath = filepath.Join(t.TempDir(), "r.jsonl")
		l, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if r := l.Runs[0]; r.Kind != kindPoisson || r.Requests.Successful != 30 || r.TTFTFromSchedule == nil {
			t.Fatalf("poisson run %+v", r)
		}
		var sched []float64
		for _, r := range readRecordsT(t, o.RecordsPath) {
			sched = append(sched, r.ScheduledMs)
		}
		slices.Sort(sched)
		var g []float64
		for i := 1; i < len(sched); i++ {
			g = append(g, math.Round((sched[i]-sched[i-1])*1000)/1000)
		}
		return g
	}
	a, b, c := gaps(5), gaps(5), gaps(6)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different arrivals:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds, same arrivals")
	}
	if slices.Min(a) == slices.Max(a) {
		t.Fatal("poisson gaps are constant")
	}
}

func TestPromptFileAndPerLineOutput(t *testing.T) {
	f := &fake{model: testModel, ttft: time.Millisecond, itl: time.Millisecond, usage: "continuous"}
	s := f.start(t)
	p := filepath.Join(t.TempDir(), "p.jsonl")
	os.WriteFile(p, []byte("{\"prompt\": \"one two three\", \"output_tokens\": 5}\n{\"prompt\": \"four five\"}\n"), 0o644)
	l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: "synchronous", MaxRequests: 4, OutputTokens: 9, Data: p, Warmup: "0"}))
	if err != nil {
		t.Fatal(err)
	}
	r := l.Runs[0]
	if l.TokenCounts != tokensFile || r.Requests.Successful != 4 || r.MeanOutputTokens != 7 || r.MeanPromptTokens != 2.5 {
		t.Fatalf("counts %q, requests %+v, mean out %v, mean prompt %v", l.TokenCounts, r.Requests, r.MeanOutputTokens, r.MeanPromptTokens)
	}
}

func readRecordsT(t *testing.T, path string) []Record {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestStrictEndpointGetsPlainRequests(t *testing.T) {
	f := &fake{model: testModel, ttft: time.Millisecond, itl: time.Millisecond, usage: "final", strict: true}
	s := f.start(t)
	l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: "synchronous", MaxRequests: 3}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.DroppedParams, []string{paramContinuous, paramExact}) || l.OutputCounts != countsUsage || l.Runs[0].Requests.Successful != 3 {
		t.Fatalf("dropped %v counts %q requests %+v", l.DroppedParams, l.OutputCounts, l.Runs[0].Requests)
	}
	f.status = 400
	if _, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: "synchronous", MaxRequests: 3})); err == nil || !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("an endpoint refusing everything: %v", err)
	}
}

// A probe that under-reads the capacity places the ladder too low: its top still climbs past the
// probe's peak (truncated). The sweep then goes on upward at the ladder's spacing instead of ending
// on a lower bound. Here the probe runs 2 streams against a server that serves 8 at once, and the knee
// search is held to the first probe, so only climbing can reach the capacity.
func TestSweepClimbsPastAnUnderReadProbe(t *testing.T) {
	f := &fake{model: testModel, ttft: 10 * time.Millisecond, itl: 2 * time.Millisecond, usage: "continuous", capacity: make(chan struct{}, 8)}
	s := f.start(t)
	o := opts(s.URL, results.LoadConfig{Profile: "sweep", MaxConcurrency: 2, Rates: 3, MaxDuration: results.Duration(600 * time.Millisecond)})
	o.MaxNumSeqs = 2 // the knee search stops at its first probe
	l, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	k := l.Saturation.Knee
	if k.ClimbedRungs < 1 || k.ClimbedRungs > maxClimb || len(l.Saturation.Rungs) != 3+k.ClimbedRungs {
		t.Fatalf("climbed %d rungs, saturation %+v", k.ClimbedRungs, l.Saturation)
	}
	consts := l.Runs[len(l.Runs)-len(l.Saturation.Rungs):]
	step := consts[1].TargetRate - consts[0].TargetRate
	for i := 1; i < len(consts); i++ {
		if d := consts[i].TargetRate - consts[i-1].TargetRate; math.Abs(d-step) > 1e-9 || consts[i].Kind != kindConstant {
			t.Fatalf("rung %d: %s at %v, step %v, want constant rungs %v apart", i, consts[i].Kind, consts[i].TargetRate, d, step)
		}
	}
	if last := consts[len(consts)-1].TargetRate; math.Abs(k.LadderTopReqS-last) > 1e-9 {
		t.Fatalf("ladder top %v, last rung at %v", k.LadderTopReqS, last)
	}
	if top, probe := l.Saturation.Rungs[len(l.Saturation.Rungs)-1], l.Saturation.Peak; top <= probe {
		t.Fatalf("the climbed ladder's top %v tok/s is not past the probe's %v", top, probe)
	}
}

// Over TLS (read by net/http) chunks are still timed by the kernel's receive time, not the read time.
func TestTLSChunksAreKernelTimed(t *testing.T) {
	f := &fake{model: testModel, ttft: 5 * time.Millisecond, itl: 2 * time.Millisecond, usage: "continuous", tls: true}
	s := f.start(t)
	rx := &rxStatus{}
	hc := newHTTPClient(1, rx)
	hc.Transport.(*http.Transport).TLSClientConfig = s.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cl := &client{hc: hc, endpoint: s.URL + "/v1/chat/completions", chat: true, model: testModel, reqTimeout: time.Minute, stall: time.Minute, epoch: time.Now(), rx: rx}
	for range 2 { // the kernel turns stamping on a moment after the first socket asks
		rec := &Record{}
		cl.do(context.Background(), promptOf("hi"), 5, rec)
		if rec.Error != "" {
			t.Fatalf("%s: %s", rec.Error, rec.Detail)
		}
		if rec.rxN > 0 {
			return
		}
	}
	if rx.without != "" {
		t.Skipf("no kernel receive timestamps here: %s", rx.without)
	}
	t.Fatal("no chunk of a TLS stream was timed by the kernel")
}
