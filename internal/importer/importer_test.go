package importer

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func onlyRun(t *testing.T, s *results.Summary) (*results.Load, results.Run) {
	t.Helper()
	if len(s.Hosts) != 1 || len(s.Hosts[0].Models) != 1 || len(s.Hosts[0].Models[0].Endpoints) != 1 {
		t.Fatalf("want one host, model, endpoint: %+v", s.Hosts)
	}
	l := s.Hosts[0].Models[0].Endpoints[0].Load
	if l == nil || len(l.Runs) == 0 {
		t.Fatal("no load")
	}
	return l, l.Runs[0]
}

// The real benchmark_serving.py file: the distributions computed from its per-request arrays must
// agree with the summary fields vLLM itself wrote.
func TestVLLMBenchFixture(t *testing.T) {
	b := read(t, "vllm-bench-mock-ttft50-itl10.json")
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	s, f, err := Parse(b)
	if err != nil || f != FormatVLLMBench {
		t.Fatalf("Parse: %v, %s", err, f)
	}
	l, r := onlyRun(t, s)
	if s.Hosts[0].Models[0].Model != "mock" || r.Kind != "concurrency" || r.Concurrency != 16 {
		t.Errorf("model %q kind %s concurrency %d, want mock concurrency 16", s.Hosts[0].Models[0].Model, r.Kind, r.Concurrency)
	}
	if r.Requests.Successful != 240 || r.TTFT.Count != 240 || r.ITL.Count != 240*31 {
		t.Errorf("counts: successful %d ttft %d itl %d", r.Requests.Successful, r.TTFT.Count, r.ITL.Count)
	}
	checks := []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"mean ttft", r.TTFT.Mean, raw["mean_ttft_ms"].(float64), 1e-6},
		{"p50 ttft", r.TTFT.P50, raw["p50_ttft_ms"].(float64), 1e-6},
		{"p99 ttft", r.TTFT.P99, raw["p99_ttft_ms"].(float64), 1e-6},
		{"mean itl", r.ITL.Mean, raw["mean_itl_ms"].(float64), 1e-6},
		{"p99 itl", r.ITL.P99, raw["p99_itl_ms"].(float64), 1e-6},
		// TPOT and E2E come from TTFT + Σ ITL, not vLLM's own end time: within 1 %.
		{"mean tpot", r.TPOT.Mean, raw["mean_tpot_ms"].(float64), raw["mean_tpot_ms"].(float64) * 0.01},
		{"mean e2e", r.E2E.Mean, raw["mean_e2el_ms"].(float64), raw["mean_e2el_ms"].(float64) * 0.01},
		{"output tok/s", r.OutputTokS, raw["output_throughput"].(float64), 1e-9},
		{"sustained req/s", l.SustainedReqS, raw["output_throughput"].(float64) / 32, 1e-9},
		{"mean output tokens", r.MeanOutputTokens, 32, 0},
	}
	for _, c := range checks {
		if !near(c.got, c.want, c.tol) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if r.TTFT.P95 <= r.TTFT.P50 || r.TTFT.P95 > r.TTFT.P99 {
		t.Errorf("p95 %v outside p50 %v .. p99 %v", r.TTFT.P95, r.TTFT.P50, r.TTFT.P99)
	}
	if r.Goodput != nil {
		t.Errorf("request_goodput: is null in the file, got %v", *r.Goodput)
	}
	if s.StartedAt.IsZero() {
		t.Error("date not read")
	}
}

func TestVLLMBenchSummaryFieldsOnly(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal(read(t, "vllm-bench-mock-ttft50-itl10.json"), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ttfts", "itls", "errors", "output_lens", "input_lens", "generated_texts"} {
		delete(m, k)
	}
	m["request_goodput:"] = 41.5
	b, _ := json.Marshal(m)
	s, err := VLLMBench(b)
	if err != nil {
		t.Fatal(err)
	}
	_, r := onlyRun(t, s)
	if r.TTFT.Count != 0 || r.TTFT.P99 != m["p99_ttft_ms"].(float64) {
		t.Errorf("without p95 the TTFT dist must have Count 0 but keep p99: %+v", r.TTFT)
	}
	if !strings.Contains(strings.Join(s.Caveats, "\n"), "no p95 of ttft") {
		t.Errorf("caveats %v", s.Caveats)
	}
	if r.Goodput == nil || *r.Goodput != 41.5 {
		t.Errorf("goodput under \"request_goodput:\" not read: %v", r.Goodput)
	}
	m["p95_ttft_ms"] = 58.0
	b, _ = json.Marshal(m)
	s, _ = VLLMBench(b)
	if _, r = onlyRun(t, s); r.TTFT.Count != 240 || r.TTFT.P95 != 58 {
		t.Errorf("with p95: %+v", r.TTFT)
	}
}

func TestVLLMBenchKinds(t *testing.T) {
	tests := []struct {
		extra string
		kind  string
		conc  int
		rate  float64
	}{
		{`"request_rate": "inf", "max_concurrency": 1`, "synchronous", 1, 0},
		{`"request_rate": "inf", "max_concurrency": null`, "throughput", 0, 0},
		{`"request_rate": "inf", "max_concurrency": 64`, "concurrency", 64, 0},
		{`"request_rate": 4.5`, "poisson", 0, 4.5},
		{`"request_rate": "4.5"`, "poisson", 0, 4.5},
	}
	for _, tc := range tests {
		doc := `{"model_id": "m", "completed": 10, "duration": 2, "total_output_tokens": 100, "request_throughput": 5, "output_throughput": 50, ` + tc.extra + `}`
		s, err := VLLMBench([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", tc.extra, err)
		}
		_, r := onlyRun(t, s)
		if r.Kind != tc.kind || r.Concurrency != tc.conc || r.TargetRate != tc.rate {
			t.Errorf("%s: kind %s conc %d rate %v", tc.extra, r.Kind, r.Concurrency, r.TargetRate)
		}
	}
}

func TestVLLMBenchFailuresAndNaN(t *testing.T) {
	// Python's json.dump writes NaN for an empty mean; a run where everything failed still imports.
	doc := `{"model_id": "m", "num_prompts": 3, "completed": 1, "duration": 1.5, "total_output_tokens": 4, "total_input_tokens": 8,
	 "request_throughput": 0.66, "output_throughput": 2.6, "mean_ttft_ms": NaN, "note": "NaN inside a string stays",
	 "ttfts": [0.05, 0, 0], "itls": [[0.01, 0.01, 0.01], [], []], "output_lens": [4, 0, 0], "input_lens": [8, 8, 8],
	 "errors": ["", "HTTP 500", "timeout"]}`
	s, err := VLLMBench([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, r := onlyRun(t, s)
	if r.Requests.Successful != 1 || r.Requests.Errored != 2 || r.TTFT.Count != 1 || r.ITL.Count != 3 || !near(r.TPOT.Mean, 10, 1e-9) {
		t.Errorf("failed requests not excluded: %+v", r)
	}
}

func TestVLLMBenchErrors(t *testing.T) {
	tests := []struct{ doc, want string }{
		{`{"completed": -1, "request_throughput": 1}`, "completed: -1 is negative"},
		{`{"completed": 5, "request_throughput": 1, "duration": 0}`, "duration: 0 s for 5 completed"},
		{`{"completed": 5, "request_throughput": -2, "duration": 1}`, "request_throughput: -2 is negative"},
		{`{"completed": "five", "request_throughput": 1}`, "vLLM bench result"},
	}
	for _, tc := range tests {
		if _, err := VLLMBench([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestGuideLLMFixture(t *testing.T) {
	s, f, err := Parse(read(t, "guidellm-sweep.json"))
	if err != nil || f != FormatGuideLLM {
		t.Fatalf("Parse: %v %s", err, f)
	}
	l, sync := onlyRun(t, s)
	if s.Hosts[0].Models[0].Model != "Qwen/Qwen2.5-3B-Instruct" {
		t.Errorf("model %q", s.Hosts[0].Models[0].Model)
	}
	if l.Config.Profile != "sweep" || l.Config.Rates != 3 || l.Config.MaxConcurrency != 128 || len(l.Runs) != 5 {
		t.Errorf("config %+v, %d runs", l.Config, len(l.Runs))
	}
	if sync.Kind != "synchronous" || sync.Requests.Successful != 8 || sync.TTFT.Count != 8 || !near(sync.TTFT.P50, 37.5, 4) || !near(sync.ITL.P95, 10, 1) {
		t.Errorf("sync run %+v", sync)
	}
	if sync.E2E.Mean < 1000 || sync.E2E.Mean > 5000 {
		t.Errorf("request_latency is in seconds and must become ms: %v", sync.E2E.Mean)
	}
	if !near(l.PeakOutputTokS, 3650, 150) || !near(l.SustainedReqS, l.PeakOutputTokS/256, 1e-9) {
		t.Errorf("peak %v sustained %v", l.PeakOutputTokS, l.SustainedReqS)
	}
	if l.Saturation == nil || len(l.Saturation.Rungs) != 3 || l.Saturation.Peak != l.Runs[1].OutputTokS {
		t.Errorf("saturation rungs %+v", l.Saturation)
	}
	if l.Runs[2].Kind != "constant" || l.Runs[2].TargetRate != 4.6 {
		t.Errorf("constant rung %+v", l.Runs[2])
	}
}

func TestGuideLLMOldLayout(t *testing.T) {
	// guidellm 0.2/0.3: strategy under args, totals beside metrics, model under worker.
	doc := `{"benchmarks": [{"args": {"strategy": {"type_": "concurrent", "streams": 8}}, "worker": {"backend_model": "m/old"},
	  "request_totals": {"successful": 40, "errored": 1, "incomplete": 2}, "duration": 20,
	  "metrics": {"time_to_first_token_ms": {"successful": {"mean": 50, "count": 40, "percentiles": {"p50": 48, "p90": 60, "p95": 64, "p99": 70}}},
	              "output_tokens_per_second": {"successful": {"mean": 500}}, "output_token_count": {"successful": {"mean": 250}}}}]}`
	s, err := GuideLLM([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	l, r := onlyRun(t, s)
	if s.Hosts[0].Models[0].Model != "m/old" || r.Kind != "concurrency" || r.Concurrency != 8 || r.Requests.Errored != 1 || r.TTFT.P95 != 64 {
		t.Errorf("old layout: model %q run %+v", s.Hosts[0].Models[0].Model, r)
	}
	if l.Config.Profile != "concurrency" || l.SustainedReqS != 2 {
		t.Errorf("config %+v sustained %v", l.Config, l.SustainedReqS)
	}
}

func TestGuideLLMErrors(t *testing.T) {
	tests := []struct{ doc, want string }{
		{`{"benchmarks": []}`, "is empty"},
		{`{"benchmarks": [{"metrics": {}}]}`, "benchmarks[0]: no strategy type"},
		{`{"benchmarks": [{"config": {"strategy": {"type_": "warp"}}, "metrics": {}}]}`, `strategy "warp"`},
		{`{"benchmarks": [{"config": {"strategy": {"type_": "synchronous"}}}]}`, `no "metrics"`},
		{`{"benchmarks": [{"config": {"strategy": {"type_": "synchronous"}}, "duration": -3, "metrics": {}}]}`, "window: -3 is negative"},
	}
	for _, tc := range tests {
		if _, err := GuideLLM([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestDetectAndRead(t *testing.T) {
	tests := []struct {
		doc  string
		want Format
		err  string
	}{
		{`{"schema_version": "1.0", "hosts": []}`, FormatGPUVet, ""},
		{`{"benchmarks": [1]}`, FormatGuideLLM, ""},
		{`{"completed": 1, "request_throughput": 2}`, FormatVLLMBench, ""},
		{`{"hello": 1}`, "", "unknown result format"},
		{`[1, 2]`, "", "not a JSON object"},
		{``, "", "not a JSON object"},
	}
	for _, tc := range tests {
		f, err := Detect([]byte(tc.doc))
		if f != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Detect(%s) = %s, %v; want %s, %q", tc.doc, f, err, tc.want, tc.err)
		}
	}
	if _, _, err := Parse([]byte(`{"schema_version": "2.0"}`)); err == nil || !strings.Contains(err.Error(), "schema_version 2.0") {
		t.Errorf("a future major schema must be refused: %v", err)
	}
	if _, _, err := Read(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("a missing file must be an error")
	}
	s, f, err := Read(filepath.Join("testdata", "guidellm-sweep.json"))
	if err != nil || f != FormatGuideLLM || s.Environment != "guidellm" {
		t.Errorf("Read: %v %s %q", err, f, s.Environment)
	}
	if _, err := json.Marshal(s); err != nil {
		t.Errorf("imported summary does not encode: %v", err)
	}
}

func TestOverflowIsRefused(t *testing.T) {
	doc := `{"completed": 1, "request_throughput": 1, "duration": 1, "ttfts": [1e308], "itls": [[1e308]], "output_lens": [2]}`
	if _, _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("err %v, want an overflow error", err)
	}
}

func TestNullNonFinite(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a": NaN, "b": -Infinity, "c": Infinity}`, `{"a": null, "b": null, "c": null}`},
		{`{"s": "NaN and Infinity \" NaN"}`, `{"s": "NaN and Infinity \" NaN"}`},
		{`[1, 2]`, `[1, 2]`},
	}
	for _, tc := range tests {
		if got := string(nullNonFinite([]byte(tc.in))); got != tc.want {
			t.Errorf("nullNonFinite(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestPercentileMatchesNumpy(t *testing.T) {
	// numpy.percentile([1, 2, 3, 4], [50, 90, 95, 99]) = 2.5, 3.7, 3.85, 3.97
	d := exactDist([]float64{4, 1, 3, 2})
	for _, c := range []struct{ got, want float64 }{{d.P50, 2.5}, {d.P90, 3.7}, {d.P95, 3.85}, {d.P99, 3.97}, {d.Mean, 2.5}} {
		if !near(c.got, c.want, 1e-12) {
			t.Errorf("got %v want %v", c.got, c.want)
		}
	}
	if one := exactDist([]float64{7}); one.P99 != 7 || one.Count != 1 {
		t.Errorf("one sample: %+v", one)
	}
}

// FuzzParse: no input may panic the importer, and what it accepts must encode as JSON.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"completed": 1, "request_throughput": 2, "duration": 1, "ttfts": [0.1], "itls": [[0.01]], "output_lens": [2], "errors": [""]}`))
	f.Add([]byte(`{"completed": 1, "request_throughput": 2, "duration": 1, "ttfts": [0.1, 0.2], "itls": [[0.01]], "output_lens": [2]}`))
	f.Add([]byte(`{"benchmarks": [{"config": {"strategy": {"type_": "synchronous"}}, "metrics": {"time_to_first_token_ms": {"successful": {"count": 1, "percentiles": {"p95": 1}}}}}]}`))
	f.Add([]byte(`{"schema_version": "1.0", "hosts": [{"models": [{"endpoints": [{"load": {"runs": []}}]}]}]}`))
	f.Add([]byte(`{"a": NaN}`))
	f.Add([]byte(`{"completed": 1, "request_throughput": 1, "duration": 1, "ttfts": [1e308], "itls": [[1e308]], "output_lens": [2]}`))
	f.Add([]byte(`{"completed": 1e400}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, _, err := Parse(b)
		if err != nil {
			return
		}
		if _, err := json.Marshal(s); err != nil {
			t.Fatalf("accepted input gives a summary that does not encode: %v", err)
		}
	})
}

// guidellmSweep writes a minimal guidellm sweep: a sync run, the probe and the constant rungs.
func guidellmSweep(probe float64, rungs ...float64) []byte {
	bench := func(strategy string, out float64) string {
		return `{"config": {"strategy": ` + strategy + `}, "duration": 20, "metrics": {"request_totals": {"successful": 100},
		  "output_tokens_per_second": {"successful": {"mean": ` + fmtF(out) + `}}, "output_token_count": {"successful": {"mean": 256}},
		  "time_to_first_token_ms": {"successful": {"count": 100, "percentiles": {"p50": 30, "p95": 40, "p99": 45}}}}}`
	}
	parts := []string{bench(`{"type_": "synchronous"}`, 90), bench(`{"type_": "throughput", "max_concurrency": 128}`, probe)}
	for i, r := range rungs {
		parts = append(parts, bench(`{"type_": "constant", "rate": `+fmtF(float64(i+1))+`}`, r))
	}
	return []byte(`{"args": {"model": "m"}, "benchmarks": [` + strings.Join(parts, ",") + `]}`)
}

func fmtF(v float64) string { b, _ := json.Marshal(v); return string(b) }

// The seed's own sweep cases, read from guidellm reports: the saturation analysis marks the lower
// bounds exactly as it does on gpuvet's own sweeps.
func TestGuideLLMSaturationSeedCases(t *testing.T) {
	tests := []struct {
		name        string
		probe       float64
		rungs       []float64
		lowerBound  bool
		unsaturated bool
	}{
		{"unsaturated ladder 400..2400, probe 2700", 2700, []float64{400, 800, 1200, 1600, 2000, 2400}, true, true},
		{"bent knee ..1900, 1950, probe 2100", 2100, []float64{400, 800, 1200, 1600, 1900, 1950}, false, false},
		{"probe 3200 over a top rung of 2400", 3200, []float64{400, 800, 1200, 1600, 2000, 2400}, false, false},
		{"flat ladder", 2500, []float64{2400, 2400, 2400, 2400, 2400, 2400}, false, false},
		{"truncated: top rung above the probe", 2000, []float64{500, 1000, 1500, 2200}, true, false},
	}
	for _, tc := range tests {
		s, err := GuideLLM(guidellmSweep(tc.probe, tc.rungs...))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		l, _ := onlyRun(t, s)
		if l.Saturation.LowerBound() != tc.lowerBound || l.Saturation.Unsaturated != tc.unsaturated {
			t.Errorf("%s: saturation %+v", tc.name, l.Saturation)
		}
		if tc.lowerBound != strings.Contains(strings.Join(s.Caveats, "\n"), "lower bound") {
			t.Errorf("%s: caveats %v", tc.name, s.Caveats)
		}
	}
}
