// Package judge turns measured figures into verdicts: absolute gates, reference-table overrides,
// GPU-to-GPU comparisons, baseline overhead, and the ok/flag/failed roll-up. Every rule is a small
// pure function over plain data, so each can be tested by a table and each verdict can say which
// rule, which threshold and which source decided it.
package judge

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// LLM metric names used in comparisons and baselines. Their names carry their class: a name ending
// in "_req_s" or containing "tok_s" is a throughput; a name starting with "ttft" is a TTFT.
const (
	MetricSustainedReqS  = "sustained_req_s"
	MetricPeakOutputTokS = "output_tok_s_peak"
	MetricTTFTP95        = "ttft_p95_ms"
	MetricTTFTP99        = "ttft_p99_ms"
	MetricITLP95         = "itl_p95_ms"
	MetricTPOTP95        = "tpot_p95_ms"
	// The aicr-style fixed-concurrency run's figures (present when the profile has one). Its TTFT
	// p99 is a tail figure of one short window: compared against baselines (with the TTFT ms floor,
	// hence the "ttft" prefix), never GPU to GPU, where one scheduler hiccup would flag a card.
	MetricConcOutputTokS = "concurrency_output_tok_s"
	MetricConcTTFTP99    = "ttft_p99_concurrency_ms"
)

// Default GPU-to-GPU tolerances and noise guards (seed 003, "How results are judged").
const (
	DefaultLLMVariancePct     = 20.0
	DefaultGEMMVariancePct    = 25.0
	DefaultMinSamples         = 30
	DefaultMinThroughputReqS  = 1.0
	DefaultMinTTFTDeltaMs     = 25.0
	DefaultBaselineTolerance  = 10.0
	DefaultAICRTolerancePct   = 10.0
	DefaultCalibTTFTMarginPct = 30.0
	DefaultCalibThrMarginPct  = 25.0
)

// Cell is one GPU's figure for one metric.
type Cell struct {
	GPU   int
	Value float64
	// Samples is the number of successful requests behind the figure; 0 = not applicable (GEMM, PCIe).
	Samples int
	// ReqS is the GPU's sustained req/s, used by the tiny-denominator guard on throughput metrics.
	ReqS float64
	// LowerBound: the figure comes from a truncated or unsaturated sweep, so it is only a lower bound.
	LowerBound bool
	// CI is the bootstrap confidence interval of Value, when the load generator computed one.
	CI *results.Interval
}

// Guards are the GPU-to-GPU tolerance and noise guards. A zero guard is disabled; VariancePct is the
// tolerance itself (LLM 20 %, GEMM 25 %).
type Guards struct {
	VariancePct       float64 // flag a card worse than best by more than this %
	MinSamples        float64 // the weakest GPU needs this many successful requests, else low confidence
	MinThroughputReqS float64 // a throughput spread below this many req/s is a tiny-denominator artifact
	MinTTFTDeltaMs    float64 // a TTFT spread at or below this many ms is not material
}

// LLMGuards returns the seed's defaults for LLM metrics.
func LLMGuards() Guards {
	return Guards{VariancePct: DefaultLLMVariancePct, MinSamples: DefaultMinSamples,
		MinThroughputReqS: DefaultMinThroughputReqS, MinTTFTDeltaMs: DefaultMinTTFTDeltaMs}
}

// GEMMGuards returns the seed's defaults for GEMM (no request guards apply).
func GEMMGuards() Guards { return Guards{VariancePct: DefaultGEMMVariancePct} }

// IsThroughputMetric reports whether a metric is an LLM throughput (req/s or tok/s).
func IsThroughputMetric(metric string) bool {
	return strings.HasSuffix(metric, "req_s") || strings.Contains(metric, "tok_s")
}

// IsTTFTMetric reports whether a metric is a time-to-first-token figure.
func IsTTFTMetric(metric string) bool { return strings.HasPrefix(metric, "ttft") }

// CompareGPUs judges one metric across the cards of a host, per the seed's rule and noise guards:
// a card below best × (1 − v) (higher-better) or above best × (1 + v) (lower-better) flags, unless
//   - the weakest GPU completed fewer than MinSamples successful requests (the whole comparison is
//     low-confidence and nothing is flagged),
//   - the metric is a throughput and the card's req/s spread to the best is below MinThroughputReqS,
//   - the metric is a TTFT and the card's spread to the best is ≤ MinTTFTDeltaMs,
//   - the card's throughput is a lower bound (truncated/unsaturated sweep),
//   - both the card and the best carry a confidence interval and the two overlap (inside the noise).
func CompareGPUs(metric string, cells []Cell, higherIsBetter bool, g Guards) results.Compare {
	c := results.Compare{Metric: metric, HigherIsBetter: higherIsBetter, VariancePct: g.VariancePct}
	cells = finiteCells(cells, &c)
	if len(cells) == 0 {
		c.Note = joinNote(c.Note, "no values to compare")
		return c
	}
	bi := bestIndex(cells, higherIsBetter)
	best := cells[bi]
	c.Best = best.Value
	for _, x := range cells {
		c.Values = append(c.Values, results.CompareCell{GPU: x.GPU, Value: x.Value,
			DeltaPct: deltaPct(x.Value, best.Value, higherIsBetter), LowerBound: x.LowerBound})
	}
	if len(cells) < 2 {
		c.Note = joinNote(c.Note, "single GPU: nothing to compare")
		return c
	}
	if n, low := lowSamples(cells, g.MinSamples); low {
		c.LowConfidence = true
		c.Note = joinNote(c.Note, fmt.Sprintf("low confidence: the weakest GPU completed %d successful requests (< %g): nothing flagged", n, g.MinSamples))
		return c
	}
	for i := range c.Values {
		if i == bi {
			c.Values[i].Reason = "best"
			continue
		}
		c.Values[i].Flagged, c.Values[i].Reason = judgeCell(metric, cells[i], best, higherIsBetter, g)
	}
	return c
}

// judgeCell decides one card against the best card; it returns whether to flag and why (or why not).
func judgeCell(metric string, x, best Cell, higher bool, g Guards) (bool, string) {
	d := deltaPct(x.Value, best.Value, higher)
	dir := "below"
	if !higher {
		dir = "above"
	}
	if !Outlier(x.Value, best.Value, higher, g.VariancePct) {
		return false, fmt.Sprintf("within %g %% of best (%.1f %% %s)", g.VariancePct, d, dir)
	}
	what := fmt.Sprintf("%s %s on gpu %d is %.1f %% %s the best (gpu %d: %s)", metric, fmtNum(x.Value), x.GPU, d, dir, best.GPU, fmtNum(best.Value))
	thr := IsThroughputMetric(metric)
	switch {
	case thr && higher && x.LowerBound:
		return false, what + ": not flagged, its sweep was truncated or unsaturated, so the figure is only a lower bound"
	case thr && g.MinThroughputReqS > 0 && x.ReqS > 0 && best.ReqS > 0 && math.Abs(best.ReqS-x.ReqS) < g.MinThroughputReqS:
		return false, what + fmt.Sprintf(": not flagged, the spread is %.2f req/s (< %g req/s), a tiny-denominator artifact", math.Abs(best.ReqS-x.ReqS), g.MinThroughputReqS)
	case IsTTFTMetric(metric) && g.MinTTFTDeltaMs > 0 && math.Abs(x.Value-best.Value) <= g.MinTTFTDeltaMs:
		return false, what + fmt.Sprintf(": not flagged, the spread is %.1f ms (≤ %g ms), not material", math.Abs(x.Value-best.Value), g.MinTTFTDeltaMs)
	case CIOverlap(x.CI, best.CI):
		return false, what + fmt.Sprintf(": not flagged, the confidence intervals overlap ([%s, %s] vs [%s, %s]): inside the noise",
			fmtNum(x.CI.Lo), fmtNum(x.CI.Hi), fmtNum(best.CI.Lo), fmtNum(best.CI.Hi))
	}
	return true, what + fmt.Sprintf(", beyond the %g %% tolerance: check this card's clocks, power, PCIe link and NUMA binding", g.VariancePct)
}

// Outlier is the bare seed rule: value below best × (1 − pct/100) when higher is better, or above
// best × (1 + pct/100) when lower is better.
func Outlier(value, best float64, higherIsBetter bool, pct float64) bool {
	if higherIsBetter {
		return value < best*(1-pct/100)
	}
	return value > best*(1+pct/100)
}

// CIOverlap reports whether two confidence intervals are both present and overlap.
func CIOverlap(a, b *results.Interval) bool {
	return a != nil && b != nil && a.Lo <= b.Hi && b.Lo <= a.Hi
}

// deltaPct is how much worse value is than ref, in % of ref (positive = worse; 0 when ref is 0).
func deltaPct(value, ref float64, higherIsBetter bool) float64 {
	if ref == 0 {
		return 0
	}
	if higherIsBetter {
		return (ref - value) / math.Abs(ref) * 100
	}
	return (value - ref) / math.Abs(ref) * 100
}

func bestIndex(cells []Cell, higher bool) int {
	bi := 0
	for i, x := range cells {
		if (higher && x.Value > cells[bi].Value) || (!higher && x.Value < cells[bi].Value) {
			bi = i
		}
	}
	return bi
}

// lowSamples finds the weakest GPU's successful-request count (cells with Samples 0 do not count)
// and whether it is under the minimum.
func lowSamples(cells []Cell, min float64) (int, bool) {
	if min <= 0 {
		return 0, false
	}
	weakest := -1
	for _, x := range cells {
		if x.Samples > 0 && (weakest < 0 || x.Samples < weakest) {
			weakest = x.Samples
		}
	}
	return weakest, weakest >= 0 && float64(weakest) < min
}

// finiteCells drops NaN/Inf figures (they cannot be compared or written to JSON) and notes them.
func finiteCells(cells []Cell, c *results.Compare) []Cell {
	out := make([]Cell, 0, len(cells))
	for _, x := range cells {
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			c.Note = joinNote(c.Note, fmt.Sprintf("gpu %d has no finite value: left out", x.GPU))
			continue
		}
		out = append(out, x)
	}
	return out
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// fmtNum prints a figure with sensible precision for a reason line.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
