package importer

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// vllmResult is the part of a vLLM `bench serve --save-result` / benchmark_serving.py result that
// gpuvet reads. Per-request arrays cover every request, failed ones included (errors[i] != "").
type vllmResult struct {
	Date                 string          `json:"date"`
	Backend              string          `json:"backend"`
	ModelID              string          `json:"model_id"`
	NumPrompts           int             `json:"num_prompts"`
	RequestRate          json.RawMessage `json:"request_rate"` // "inf" or a number
	Burstiness           *float64        `json:"burstiness"`
	MaxConcurrency       *int            `json:"max_concurrency"`
	Duration             float64         `json:"duration"`
	Completed            int             `json:"completed"`
	Failed               *int            `json:"failed"`
	TotalInputTokens     int             `json:"total_input_tokens"`
	TotalOutputTokens    int             `json:"total_output_tokens"`
	RequestThroughput    float64         `json:"request_throughput"`
	OutputThroughput     float64         `json:"output_throughput"`
	TotalTokenThroughput float64         `json:"total_token_throughput"`
	// GoodputColon is the key as vLLM of the v0.6.6 era writes it ("request_goodput:", colon included).
	GoodputColon *float64    `json:"request_goodput:"`
	Goodput      *float64    `json:"request_goodput"`
	InputLens    []int       `json:"input_lens"`
	OutputLens   []int       `json:"output_lens"`
	TTFTs        []float64   `json:"ttfts"` // seconds
	ITLs         [][]float64 `json:"itls"`  // seconds, per request
	Errors       []string    `json:"errors"`
}

// VLLMBench reads a vLLM bench result as a summary with one run. With the per-request arrays the
// distributions are exact (TTFT, ITL pooled; TPOT and E2E from TTFT + Σ ITL); without them the
// summary fields are used, and a distribution whose p95 the file lacks gets Count 0 so no gate
// reads a p95 of zero as a pass.
func VLLMBench(b []byte) (*results.Summary, error) {
	b = nullNonFinite(b)
	var r vllmResult
	if err := decode(b, &r); err != nil {
		return nil, fmt.Errorf("vLLM bench result: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("vLLM bench result: %w", err)
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("vLLM bench result: %w", err)
	}
	var caveats []string
	run := results.Run{WindowSeconds: r.Duration, OutputTokS: r.OutputThroughput, TotalTokS: r.TotalTokenThroughput, ReqS: r.RequestThroughput}
	run.Requests.Successful = r.Completed
	switch {
	case r.Failed != nil:
		run.Requests.Errored = *r.Failed
	case r.NumPrompts > r.Completed:
		run.Requests.Errored = r.NumPrompts - r.Completed
	}
	if r.Completed > 0 {
		run.MeanOutputTokens = float64(r.TotalOutputTokens) / float64(r.Completed)
		run.MeanPromptTokens = float64(r.TotalInputTokens) / float64(r.Completed)
	}
	run.Goodput = cmp.Or(r.GoodputColon, r.Goodput)
	kind, c := r.kind()
	run.Kind, run.Concurrency, run.TargetRate = kind, c.concurrency, c.rate
	caveats = append(caveats, c.caveats...)

	if ok, why := r.arraysUsable(); ok {
		r.fillFromArrays(&run)
	} else {
		if why != "" {
			caveats = append(caveats, why)
		}
		for _, m := range []struct {
			name string
			d    *results.Dist
		}{{"ttft", &run.TTFT}, {"itl", &run.ITL}, {"tpot", &run.TPOT}, {"e2el", &run.E2E}} {
			d, missing := summaryDist(fields, m.name, r.Completed)
			*m.d = d
			if missing != "" {
				caveats = append(caveats, missing)
			}
		}
	}

	l := &results.Load{
		Config: results.LoadConfig{Profile: kind, API: apiOf(r.Backend), Concurrency: c.concurrency, MaxConcurrency: c.concurrency,
			Rate: c.rate, MaxRequests: r.NumPrompts, Data: "imported (vLLM bench)"},
		Model: r.ModelID, TokenCounts: "vLLM bench (its tokenizer)", OutputCounts: "tokenizer",
		Runs: []results.Run{run}, PeakOutputTokS: r.OutputThroughput,
	}
	if run.MeanOutputTokens > 0 {
		l.SustainedReqS = r.OutputThroughput / run.MeanOutputTokens
		l.Config.OutputTokens = int(math.Round(run.MeanOutputTokens))
		l.Config.PromptTokens = int(math.Round(run.MeanPromptTokens))
	}
	model := r.ModelID
	if model == "" {
		model = "unknown"
		caveats = append(caveats, "vLLM bench result has no model_id: the model is \"unknown\"")
	}
	started, _ := time.Parse("20060102-150405", r.Date)
	return imported(FormatVLLMBench, model, started, l, caveats), nil
}

func (r *vllmResult) validate() error {
	for name, v := range map[string]float64{"duration": r.Duration, "request_throughput": r.RequestThroughput,
		"output_throughput": r.OutputThroughput, "total_token_throughput": r.TotalTokenThroughput} {
		if v < 0 {
			return fmt.Errorf("%s: %g is negative", name, v)
		}
	}
	switch {
	case r.Completed < 0:
		return fmt.Errorf("completed: %d is negative", r.Completed)
	case r.Completed > 0 && r.Duration <= 0:
		return fmt.Errorf("duration: %g s for %d completed requests; the file is damaged", r.Duration, r.Completed)
	case r.TotalOutputTokens < 0 || r.TotalInputTokens < 0:
		return fmt.Errorf("total_input_tokens/total_output_tokens: negative")
	}
	return nil
}

type loadShape struct {
	concurrency int
	rate        float64
	caveats     []string
}

// kind maps vLLM's request rate and max concurrency onto a gpuvet run kind.
func (r *vllmResult) kind() (string, loadShape) {
	var sh loadShape
	rate := math.Inf(1)
	if len(r.RequestRate) > 0 {
		var s string
		var x float64
		if json.Unmarshal(r.RequestRate, &x) == nil {
			rate = x
		} else if json.Unmarshal(r.RequestRate, &s) == nil && s != "inf" {
			if v, err := strconv.ParseFloat(s, 64); err == nil {
				rate = v
			}
		}
	}
	if r.MaxConcurrency != nil && *r.MaxConcurrency > 0 {
		sh.concurrency = *r.MaxConcurrency
	}
	if !math.IsInf(rate, 0) && rate > 0 {
		sh.rate = rate
		if r.Burstiness != nil && *r.Burstiness != 1 {
			sh.caveats = append(sh.caveats, fmt.Sprintf("vLLM bench arrivals had burstiness %g (gamma, not Poisson)", *r.Burstiness))
		}
		if sh.concurrency > 0 {
			sh.caveats = append(sh.caveats, fmt.Sprintf("vLLM bench rate %g req/s was also capped at %d in flight", rate, sh.concurrency))
		}
		return "poisson", sh
	}
	switch sh.concurrency {
	case 0:
		return "throughput", sh
	case 1:
		return "synchronous", sh
	}
	return "concurrency", sh
}

// arraysUsable reports whether the per-request arrays are present and consistent.
func (r *vllmResult) arraysUsable() (bool, string) {
	if len(r.TTFTs) == 0 {
		return false, ""
	}
	n := len(r.TTFTs)
	if len(r.ITLs) != n || len(r.OutputLens) != n || (len(r.Errors) != 0 && len(r.Errors) != n) {
		return false, fmt.Sprintf("vLLM bench per-request arrays disagree in length (ttfts %d, itls %d, output_lens %d, errors %d): used the summary fields",
			n, len(r.ITLs), len(r.OutputLens), len(r.Errors))
	}
	return true, ""
}

// fillFromArrays computes exact distributions from the successful requests.
func (r *vllmResult) fillFromArrays(run *results.Run) {
	var ttft, itl, tpot, e2e []float64
	for i, t := range r.TTFTs {
		if len(r.Errors) > 0 && r.Errors[i] != "" { // arraysUsable checked the lengths agree
			continue
		}
		sum := 0.0
		for _, g := range r.ITLs[i] {
			itl = append(itl, g*1000)
			sum += g
		}
		ttft = append(ttft, t*1000)
		e2e = append(e2e, (t+sum)*1000)
		if out := r.OutputLens[i]; out > 1 {
			tpot = append(tpot, sum*1000/float64(out-1))
		}
	}
	run.TTFT, run.ITL, run.TPOT, run.E2E = exactDist(ttft), exactDist(itl), exactDist(tpot), exactDist(e2e)
}

// summaryDist reads mean_/median_/pNN_<metric>_ms summary fields.
func summaryDist(fields map[string]json.RawMessage, metric string, count int) (results.Dist, string) {
	get := func(key string) (float64, bool) {
		raw, ok := fields[key]
		if !ok {
			return 0, false
		}
		var v *float64
		if json.Unmarshal(raw, &v) != nil || v == nil {
			return 0, false
		}
		return *v, true
	}
	var d results.Dist
	d.Mean, _ = get("mean_" + metric + "_ms")
	if v, ok := get("p50_" + metric + "_ms"); ok {
		d.P50 = v
	} else {
		d.P50, _ = get("median_" + metric + "_ms")
	}
	d.P90, _ = get("p90_" + metric + "_ms")
	d.P99, _ = get("p99_" + metric + "_ms")
	p95, ok := get("p95_" + metric + "_ms")
	if !ok {
		return d, fmt.Sprintf("vLLM bench result has no p95 of %s (rerun with --metric-percentiles 50,90,95,99, or keep the per-request arrays): %s p95 not judged", metric, metric)
	}
	d.P95, d.Count = p95, count
	return d, ""
}

func apiOf(backend string) string {
	if strings.Contains(backend, "chat") {
		return "chat"
	}
	return "completions"
}

// nullNonFinite turns Python's bare NaN / Infinity / -Infinity tokens (json.dump writes them for
// an empty mean) into null outside strings, so a result with failures still imports.
func nullNonFinite(b []byte) []byte {
	if !bytes.Contains(b, []byte("NaN")) && !bytes.Contains(b, []byte("Infinity")) {
		return b
	}
	out := make([]byte, 0, len(b))
	inStr, esc := false, false
next:
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case esc:
			esc = false
		case inStr:
			esc, inStr = c == '\\', c != '"'
		case c == '"':
			inStr = true
		default:
			for _, tok := range []string{"-Infinity", "Infinity", "NaN"} {
				if bytes.HasPrefix(b[i:], []byte(tok)) {
					out = append(out, "null"...)
					i += len(tok) - 1
					continue next
				}
			}
		}
		out = append(out, c)
	}
	return out
}
