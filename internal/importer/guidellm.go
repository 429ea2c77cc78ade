package importer

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/gpuvet/gpuvet/internal/analysis"
	"github.com/gpuvet/gpuvet/internal/results"
)

// guidellm's benchmarks.json report (GenerativeBenchmarksReport). guidellm ≥ 0.4 keeps the strategy
// under config.strategy and the request totals under metrics.request_totals; 0.2–0.3 kept them under
// args.strategy and request_totals. Both are read.
type glReport struct {
	Args       map[string]json.RawMessage `json:"args"`
	Benchmarks []glBenchmark              `json:"benchmarks"`
}

type glBenchmark struct {
	Config *struct {
		Strategy *glStrategy    `json:"strategy"`
		Backend  map[string]any `json:"backend"`
	} `json:"config"`
	Args *struct {
		Strategy *glStrategy `json:"strategy"`
	} `json:"args"`
	Worker *struct {
		BackendModel string `json:"backend_model"`
	} `json:"worker"`
	Metrics       *glMetrics `json:"metrics"`
	RequestTotals *glTotals  `json:"request_totals"`
	StartTime     float64    `json:"start_time"`
	EndTime       float64    `json:"end_time"`
	Duration      float64    `json:"duration"`
}

type glStrategy struct {
	Type           string  `json:"type_"`
	Streams        int     `json:"streams"`
	Rate           float64 `json:"rate"`
	MaxConcurrency int     `json:"max_concurrency"`
}

type glTotals struct {
	Successful int `json:"successful"`
	Incomplete int `json:"incomplete"`
	Errored    int `json:"errored"`
}

type glMetrics struct {
	RequestTotals     *glTotals `json:"request_totals"`
	RequestsPerSecond glStatus  `json:"requests_per_second"`
	RequestLatency    glStatus  `json:"request_latency"` // seconds
	PromptTokenCount  glStatus  `json:"prompt_token_count"`
	OutputTokenCount  glStatus  `json:"output_token_count"`
	TTFT              glStatus  `json:"time_to_first_token_ms"`
	TPOT              glStatus  `json:"time_per_output_token_ms"`
	ITL               glStatus  `json:"inter_token_latency_ms"`
	OutputTokS        glStatus  `json:"output_tokens_per_second"`
	TotalTokS         glStatus  `json:"tokens_per_second"`
}

type glStatus struct {
	Successful *glDist `json:"successful"`
}

type glDist struct {
	Mean        float64            `json:"mean"`
	Median      float64            `json:"median"`
	Min         float64            `json:"min"`
	Max         float64            `json:"max"`
	Count       int                `json:"count"`
	Percentiles map[string]float64 `json:"percentiles"`
}

// GuideLLM reads a guidellm benchmarks.json report as a summary: one run per benchmark (synchronous,
// throughput, constant, poisson, concurrent → concurrency). A sweep gets the seed's
// truncated/unsaturated analysis in Load.Saturation, like gpuvet's own sweeps.
func GuideLLM(b []byte) (*results.Summary, error) {
	b = nullNonFinite(b)
	var rep glReport
	if err := decode(b, &rep); err != nil {
		return nil, fmt.Errorf("guidellm report: %w", err)
	}
	if len(rep.Benchmarks) == 0 {
		return nil, fmt.Errorf("guidellm report: \"benchmarks\" is empty: nothing was measured")
	}
	var caveats []string
	l := &results.Load{TokenCounts: "guidellm (its tokenizer)", OutputCounts: "usage"}
	model := ""
	kinds := map[string]bool{}
	for i, bm := range rep.Benchmarks {
		run, err := bm.run(i)
		if err != nil {
			return nil, fmt.Errorf("guidellm report: benchmarks[%d]: %w", i, err)
		}
		kinds[run.Kind] = true
		l.Runs = append(l.Runs, run)
		model = cmp.Or(model, bm.model())
	}
	model = cmp.Or(model, argString(rep.Args, "model"))
	if model == "" {
		model = "unknown"
		caveats = append(caveats, "guidellm report names no model: the model is \"unknown\"")
	}
	l.Model = model
	peakRun := fillPeak(l)
	l.Config = glConfig(l, kinds, peakRun)
	if l.Config.Profile == "sweep" {
		l.Saturation = sweepSaturation(l)
		if l.Saturation.LowerBound() {
			caveats = append(caveats, "imported guidellm sweep is a lower bound: "+l.Saturation.Reason)
		}
	}
	var t time.Time
	if started := rep.Benchmarks[0].StartTime; started > 0 {
		sec, frac := math.Modf(started)
		t = time.Unix(int64(sec), int64(frac*1e9)).UTC()
	}
	return imported(FormatGuideLLM, model, t, l, caveats), nil
}

func (bm *glBenchmark) strategy() *glStrategy {
	if bm.Config != nil && bm.Config.Strategy != nil {
		return bm.Config.Strategy
	}
	if bm.Args != nil && bm.Args.Strategy != nil {
		return bm.Args.Strategy
	}
	return nil
}

func (bm *glBenchmark) model() string {
	if bm.Config != nil {
		if m, ok := bm.Config.Backend["model"].(string); ok && m != "" {
			return m
		}
	}
	if bm.Worker != nil {
		return bm.Worker.BackendModel
	}
	return ""
}

func (bm *glBenchmark) run(i int) (results.Run, error) {
	st := bm.strategy()
	if st == nil || st.Type == "" {
		return results.Run{}, fmt.Errorf("no strategy type (config.strategy.type_ or args.strategy.type_)")
	}
	if bm.Metrics == nil {
		return results.Run{}, fmt.Errorf("no \"metrics\"")
	}
	m := bm.Metrics
	r := results.Run{Kind: st.Type}
	switch st.Type {
	case "synchronous":
		r.Concurrency = 1
	case "concurrent":
		r.Kind, r.Concurrency = "concurrency", st.Streams
	case "throughput":
		r.Concurrency = st.MaxConcurrency
	case "constant", "poisson":
		r.TargetRate = st.Rate
	default:
		return results.Run{}, fmt.Errorf("strategy %q: want synchronous, concurrent, throughput, constant or poisson", st.Type)
	}
	r.WindowSeconds = bm.Duration
	if r.WindowSeconds == 0 && bm.EndTime > bm.StartTime {
		r.WindowSeconds = bm.EndTime - bm.StartTime
	}
	if tot := cmp.Or(m.RequestTotals, bm.RequestTotals); tot != nil {
		r.Requests = results.RequestCounts{Successful: tot.Successful, Errored: tot.Errored, Incomplete: tot.Incomplete}
	}
	r.TTFT, r.ITL, r.TPOT = m.TTFT.dist(1), m.ITL.dist(1), m.TPOT.dist(1)
	r.E2E = m.RequestLatency.dist(1000)
	r.ReqS, r.OutputTokS, r.TotalTokS = m.RequestsPerSecond.mean(), m.OutputTokS.mean(), m.TotalTokS.mean()
	r.MeanOutputTokens, r.MeanPromptTokens = m.OutputTokenCount.mean(), m.PromptTokenCount.mean()
	for name, v := range map[string]float64{"window": r.WindowSeconds, "requests_per_second": r.ReqS, "output_tokens_per_second": r.OutputTokS,
		"time_to_first_token_ms.p95": r.TTFT.P95, "inter_token_latency_ms.p95": r.ITL.P95} {
		if v < 0 {
			return results.Run{}, fmt.Errorf("%s: %g is negative", name, v)
		}
	}
	if r.Requests.Successful < 0 || r.Requests.Errored < 0 || r.Requests.Incomplete < 0 {
		return results.Run{}, fmt.Errorf("request_totals: negative count")
	}
	return r, nil
}

// dist converts a guidellm distribution summary, scaling its values (request_latency is seconds).
func (s glStatus) dist(scale float64) results.Dist {
	d := s.Successful
	if d == nil {
		return results.Dist{}
	}
	p := func(k string) float64 { return d.Percentiles[k] * scale }
	out := results.Dist{Count: d.Count, Mean: d.Mean * scale, Min: d.Min * scale, Max: d.Max * scale,
		P50: p("p50"), P90: p("p90"), P95: p("p95"), P99: p("p99")}
	if _, ok := d.Percentiles["p50"]; !ok {
		out.P50 = d.Median * scale
	}
	if _, ok := d.Percentiles["p95"]; !ok {
		out.Count = 0 // no p95: nothing a gate can read
	}
	return out
}

func (s glStatus) mean() float64 {
	if s.Successful == nil {
		return 0
	}
	return s.Successful.Mean
}

// fillPeak sets the peak output tok/s and sustained req/s (peak ÷ mean output tokens per request).
func fillPeak(l *results.Load) *results.Run {
	var peak *results.Run
	for i := range l.Runs {
		if peak == nil || l.Runs[i].OutputTokS > peak.OutputTokS {
			peak = &l.Runs[i]
		}
	}
	if peak == nil {
		return nil
	}
	l.PeakOutputTokS = peak.OutputTokS
	if peak.MeanOutputTokens > 0 {
		l.SustainedReqS = peak.OutputTokS / peak.MeanOutputTokens
	}
	return peak
}

func glConfig(l *results.Load, kinds map[string]bool, peak *results.Run) results.LoadConfig {
	c := results.LoadConfig{API: "chat", Data: "imported (guidellm)"}
	switch {
	case kinds["synchronous"] && kinds["throughput"] && (kinds["constant"] || kinds["poisson"]):
		c.Profile = "sweep"
		c.Rates = 0
		for _, r := range l.Runs {
			if r.Kind == "constant" || r.Kind == "poisson" {
				c.Rates++
			}
			if r.Kind == "throughput" {
				c.MaxConcurrency = r.Concurrency
			}
		}
	case len(kinds) == 1:
		c.Profile = l.Runs[0].Kind
		c.Concurrency, c.Rate = l.Runs[0].Concurrency, l.Runs[0].TargetRate
	default:
		c.Profile = "mixed"
	}
	if peak != nil {
		c.OutputTokens = int(math.Round(peak.MeanOutputTokens))
		c.PromptTokens = int(math.Round(peak.MeanPromptTokens))
	}
	return c
}

// sweepSaturation runs the seed's truncated/unsaturated analysis (analysis.AnalyzeSaturation) on the
// throughput probe and the constant rungs of an imported sweep, as gpuvet does on its own sweeps.
func sweepSaturation(l *results.Load) *results.Saturation {
	var peak float64
	var rungs []float64
	for _, r := range l.Runs {
		switch r.Kind {
		case "throughput":
			peak = r.OutputTokS
		case "constant", "poisson":
			rungs = append(rungs, r.OutputTokS)
		}
	}
	s := analysis.AnalyzeSaturation(rungs, peak)
	return &s
}

func argString(args map[string]json.RawMessage, key string) string {
	var s string
	if raw, ok := args[key]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}
