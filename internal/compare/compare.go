// Package compare is the one rule that decides whether a measured figure is worse than a reference
// (a gate's limit, sibling GPUs, a baseline host) and when the figure cannot say: too few samples, a
// client-limited load generator, a lower-bound sweep, an interval spanning the reference, a spread
// too small to matter. Every comparison calls it, so a guard added here holds everywhere.
package compare

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Outcomes of a gate or a pair.
const (
	Pass         = "pass"         // within the limit / within the tolerance of the reference
	Fail         = "fail"         // beyond it, and the figure can show it
	Inconclusive = "inconclusive" // the figure cannot decide; Why says why and how to get one that can
)

// Tighten is the one advice for a figure with too few samples or a wide interval.
const Tighten = "a longer window or more requests give more samples (load.max_duration, load.max_requests; compare.min_samples sets the minimum)"

// NeedMore says what would decide a figure from too few requests, as MLPerf LoadGen says "run N
// more queries": "n=22 of the 30 needed: 8 more requests, or load.max_duration ≥ 31 s (…)", the
// n requests' window (seconds, 0: unknown) stretched to those needed.
func NeedMore(n, need int, window float64) string {
	more := fmt.Sprintf("n=%d of the %d needed: %d more requests", n, need, need-n)
	if window > 0 && n > 0 {
		more += fmt.Sprintf(", or load.max_duration ≥ %.0f s", math.Ceil(window*float64(need)/float64(n)))
	}
	return more + " (more load.max_requests or a longer load.max_duration; compare.min_samples sets the minimum)"
}

// Figure is one measured figure with what is known of its quality.
type Figure struct {
	Value float64
	// Samples is the number of requests behind this very figure (its rung's, not the whole load's);
	// 0: not a per-request figure (GEMM, PCIe), where the sample guard does not apply.
	Samples int
	CI      *results.Interval // bootstrap confidence interval of Value, when known
	// LowerBound: a throughput from a truncated or unsaturated sweep: the true value may be higher.
	LowerBound bool
	// ClientLimited: the load generator, not the server, was the bottleneck.
	ClientLimited bool
	// CPUWait is the share (%) of its runnable time the engine's processes waited for a CPU in the
	// figure's rung (nil: not read). A loop that waits w of its time runs up to 1/(1−w) slower on a
	// healthy GPU: that much of a gap is the host's.
	CPUWait *float64
	// HostPressure: CPUWait is the host's CPU pressure (/proc/pressure/cpu), read where the engine's
	// own threads cannot be (a pod beside the load's): an upper bound of the engine's wait.
	HostPressure bool
	// Tail is the share of requests beyond the figure's percentile (0.05 for a p95; 0: a median or a
	// throughput): an engine that waited for a CPU longer than that share may have made its tail of
	// those waits alone.
	Tail float64
	ReqS float64 // the run's sustained req/s, for the tiny-denominator guard on throughputs
	// Window is the measured window of the figure's rung in seconds (0: unknown), so what would give
	// it more samples is said as a duration too.
	Window float64
	// Blocks are the figure's value in each block of its rung, where they ran at the same times as the
	// other cells' (GPUs loaded at once): Peers then judges the gap block by block (nil: not aligned).
	Blocks []float64
	gap    *blockGap // the gap to the reference block by block (Peers sets it from Blocks)
	// DriftPct is how far (±%) one moment's reading of the engine's speed may sit from its speed over
	// the run (the synchronous blocks' spread), which widened CI: a gate it leaves undecided says so.
	DriftPct float64
}

// EngineDrifted marks the reason of a gate left undecided by the engine's drift within the run.
const EngineDrifted = "widened by the engine's drift"

// Guards are the tolerance and noise guards. A zero guard is disabled.
type Guards struct {
	VariancePct       float64 // a figure worse than the reference by more than this % is an outlier
	MinSamples        int     // a figure from fewer requests cannot decide anything
	MinThroughputReqS float64 // a throughput spread below this many req/s is a tiny-denominator artifact
	MinTTFTDeltaMs    float64 // a TTFT spread at or below this many ms is not material
}

// LLMGuards are the defaults for LLM metrics.
func LLMGuards() Guards {
	return Guards{VariancePct: results.DefaultOf(results.ThLLMVariancePct), MinSamples: int(results.DefaultOf(results.ThMinSamples)),
		MinThroughputReqS: results.DefaultOf(results.ThCompareMinReqS), MinTTFTDeltaMs: results.DefaultOf(results.ThMinTTFTDeltaMs)}
}

// IsThroughputMetric reports whether a metric is an LLM throughput (req/s or tok/s).
func IsThroughputMetric(metric string) bool {
	return strings.HasSuffix(metric, "req_s") || strings.Contains(metric, "tok_s")
}

// IsTTFTMetric reports whether a metric is a time-to-first-token figure.
func IsTTFTMetric(metric string) bool { return strings.HasPrefix(metric, "ttft") }

// TooFew reports whether a figure has fewer samples than the minimum (figures without a sample
// count never do).
func TooFew(f Figure, minSamples int) bool {
	return minSamples > 0 && f.Samples > 0 && f.Samples < minSamples
}

// Doubt is why f cannot show that it is worse than a reference ("" when it can): too few samples,
// a client-limited run, or (higher is better) a lower-bound throughput. A figure in doubt may still
// show it is good enough (a client-limited latency within a limit).
func Doubt(f Figure, higherIsBetter bool, minSamples int) string {
	switch {
	case TooFew(f, minSamples):
		return NeedMore(f.Samples, minSamples, f.Window)
	case f.ClientLimited:
		return "the load generator was the bottleneck (client-limited), so the figure reads worse than the server is: give gpuvet more CPU or fewer requests in flight and rerun"
	case f.LowerBound && higherIsBetter:
		return "the sweep was truncated or unsaturated, so the figure is not a measurement (a lower bound): rerun with a longer or retried sweep"
	}
	return ""
}

// Gate judges a figure against a limit (upper: it must be ≤ limit, else ≥): it fails only when the
// figure, with its interval, is beyond the limit; an interval spanning it, too few samples, a breach
// in doubt or one the engine's CPU wait explains is inconclusive.
func Gate(f Figure, limit float64, upper bool, minSamples int) (result, why string) {
	if TooFew(f, minSamples) {
		return Inconclusive, Doubt(f, !upper, minSamples)
	}
	if f.CI != nil && f.CI.Lo <= limit && limit <= f.CI.Hi {
		if f.DriftPct > 0 {
			return Inconclusive, fmt.Sprintf("its %g %% interval [%s, %s], %s (its speed, read at one moment, is good to ±%.0f %% by the spread between the run's synchronous blocks), spans the limit: one run of this engine cannot place the figure; rerun when the engine is steadier (its host's CPU, co-tenants), or judge the node by its history", f.CI.Level*100, Num(f.CI.Lo), Num(f.CI.Hi), EngineDrifted, f.DriftPct)
		}
		return Inconclusive, fmt.Sprintf("its %g %% confidence interval [%s, %s] spans the limit: %s", f.CI.Level*100, Num(f.CI.Lo), Num(f.CI.Hi), Tighten)
	}
	if meets(f.Value, limit, upper) {
		return Pass, ""
	}
	if tailOfWaits(f, idleCPU) {
		return Inconclusive, tailWaitText(f) + ": " + CPUWaitFix
	}
	if c := cpuFactor(f, idleCPU); c > 1 {
		unstarved := f.Value * c // a throughput without the wait
		if upper {
			unstarved = f.Value / c // a latency
		}
		if meets(unstarved, limit, upper) {
			return Inconclusive, fmt.Sprintf("%s: without that wait it would be within the limit (%s): %s", cpuWaitText(f, idleCPU), Num(unstarved), CPUWaitFix)
		}
	}
	// A breach on a truncated or unsaturated sweep is not a measurement, whichever way the gate bounds.
	if d := Doubt(f, true, minSamples); d != "" {
		return Inconclusive, d
	}
	return Fail, ""
}

// meets reports whether v is within a limit: at most it (upper), else at least it.
func meets(v, limit float64, upper bool) bool {
	if upper {
		return v <= limit
	}
	return v >= limit
}

// Pair judges x against a reference figure (the best GPU) with a tolerance in %: Pass when within it
// or the spread is too small to matter, Fail when beyond it and both figures can show it,
// Inconclusive with the reason otherwise. over is how much worse x is, in % (positive = worse).
func Pair(metric string, x, ref Figure, higher bool, tolPct float64, g Guards) (result string, over float64, why string) {
	over = DeltaPct(x.Value, ref.Value, higher)
	if !(over > tolPct) {
		return Pass, over, ""
	}
	if why := smallSpread(metric, x, ref, g); why != "" {
		return Pass, over, why
	}
	if d := Doubt(x, higher && IsThroughputMetric(metric), g.MinSamples); d != "" {
		return Inconclusive, over, d
	}
	if why := cpuExplains(x, ref, over, tolPct, higher); why != "" {
		return Inconclusive, over, why
	}
	if TooFew(ref, g.MinSamples) {
		return Inconclusive, over, fewRef(ref, g.MinSamples)
	}
	if CIOverlap(x.CI, ref.CI) {
		return Inconclusive, over, fmt.Sprintf("the confidence intervals overlap ([%s, %s] vs [%s, %s]): inside the noise",
			Num(x.CI.Lo), Num(x.CI.Hi), Num(ref.CI.Lo), Num(ref.CI.Hi))
	}
	return Fail, over, ""
}

func fewRef(ref Figure, minSamples int) string {
	return fmt.Sprintf("the reference figure has only %d requests behind it (< %d): %s", ref.Samples, minSamples, Tighten)
}

// smallSpread is why a gap is too small to matter whatever its % ("" when it is not): a throughput
// spread under g.MinThroughputReqS (a tiny-denominator artifact), a TTFT one within g.MinTTFTDeltaMs.
func smallSpread(metric string, x, ref Figure, g Guards) string {
	switch {
	case IsThroughputMetric(metric) && g.MinThroughputReqS > 0 && x.ReqS > 0 && ref.ReqS > 0 && math.Abs(ref.ReqS-x.ReqS) < g.MinThroughputReqS:
		return fmt.Sprintf("the spread is %.2f req/s (< %g req/s), a tiny-denominator artifact", math.Abs(ref.ReqS-x.ReqS), g.MinThroughputReqS)
	case IsTTFTMetric(metric) && g.MinTTFTDeltaMs > 0 && math.Abs(x.Value-ref.Value) <= g.MinTTFTDeltaMs:
		return fmt.Sprintf("the spread is %.1f ms (≤ %g ms), not material", math.Abs(x.Value-ref.Value), g.MinTTFTDeltaMs)
	}
	return ""
}

// Outlier is the bare variance rule: value below best × (1 − pct/100) when higher is better, or
// above best × (1 + pct/100) when lower is better.
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

// DeltaPct is how much worse value is than ref, in % of ref (positive = worse; 0 when ref is 0).
func DeltaPct(value, ref float64, higherIsBetter bool) float64 {
	if ref == 0 {
		return 0
	}
	if higherIsBetter {
		return (ref - value) / math.Abs(ref) * 100
	}
	return (value - ref) / math.Abs(ref) * 100
}

// Num prints a figure with sensible precision for a reason line.
func Num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// CPUWaitFix is what to do when the host's CPUs, not the GPU, may have set a figure.
const CPUWaitFix = "give the engine CPUs of its own (stop the host's other work, or reserve cores for the engine) and rerun"

// cpuFactor is how much slower x's engine may have run than ref's for waiting longer for a CPU:
// (1 − ref's wait)/(1 − x's wait), a CPU-bound loop's slowdown; 1 when either wait is unknown. An
// engine that sleeps between steps loses less: the rule errs towards undecided.
func cpuFactor(x, ref Figure) float64 {
	if x.CPUWait == nil || ref.CPUWait == nil {
		return 1
	}
	wx, wr := min(*x.CPUWait, 99)/100, min(*ref.CPUWait, 99)/100
	return max(1, (1-wr)/(1-wx))
}

// idleCPU is a gate's reference: a limit is what the GPU should reach with the CPUs to itself.
var idleCPU = Figure{CPUWait: new(float64)}

// tailOfWaits reports whether x is a tail percentile whose engine waited for a CPU at least the tail's
// share of the time (5 % for a p95), against a reference whose wait is known: its slowest requests
// may be its longest waits, which a mean wait cannot bound (a healthy simulated GPU's ITL p95 read
// 181–213 % slower than its sibling's that way on a busy host).
func tailOfWaits(x, ref Figure) bool {
	return x.Tail > 0 && x.CPUWait != nil && ref.CPUWait != nil && *x.CPUWait >= 100*x.Tail
}

func tailWaitText(x Figure) string {
	return fmt.Sprintf("%s, no less than the %.0f %% of samples beyond its p%.0f, so that tail may be those waits alone", waitedText(x), 100*x.Tail, 100*(1-x.Tail))
}

// waitedText says how long x's engine (or, where it is a pod, any task of its host) waited.
func waitedText(x Figure) string {
	if x.HostPressure {
		return fmt.Sprintf("some task on the engine's host waited for a CPU %.0f %% of this rung (the host's CPU pressure; the engine's own wait is not readable from its pod)", *x.CPUWait)
	}
	return fmt.Sprintf("the engine's processes waited for a CPU %.0f %% of the time they were runnable in this rung", *x.CPUWait)
}

func cpuWaitText(x, ref Figure) string {
	t := waitedText(x)
	if ref.CPUWait != nil && *ref.CPUWait > 0 {
		t += fmt.Sprintf(" (the reference's %.0f %%)", *ref.CPUWait)
	}
	return t + fmt.Sprintf(", which alone can make it up to %.0f %% slower", (cpuFactor(x, ref)-1)*100)
}

// cpuExplains is why a gap of pct % beyond the margin is not the GPU's ("" when it is): without the
// CPU wait x's engine had beyond ref's it is within the margin. A host starving one engine (a noisy
// neighbour) must not flag its GPU.
func cpuExplains(x, ref Figure, pct, marginPct float64, higher bool) string {
	if tailOfWaits(x, ref) {
		return fmt.Sprintf("%s, whatever the %.1f %% gap: %s", tailWaitText(x), pct, CPUWaitFix)
	}
	c := cpuFactor(x, ref)
	if c <= 1 {
		return ""
	}
	left := ((1+pct/100)/c - 1) * 100 // a latency without the wait: x / c
	if higher {
		left = (1 - (1-pct/100)*c) * 100 // a throughput without the wait: x × c, as Gate takes it
	}
	if left > marginPct {
		return ""
	}
	return fmt.Sprintf("%s, leaving %.1f %% of the %.1f %% gap to the GPU, within the %g %% margin: %s", cpuWaitText(x, ref), max(left, 0), pct, marginPct, CPUWaitFix)
}
