package compare

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpuvet/gpuvet/internal/metrics"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The interval rule: a figure is worse than its reference only when worse by more than a material
// margin AND the confidence interval of the difference lies wholly beyond it, so identical figures
// never flag and each comparison can say the smallest slowdown it could have flagged. Differences are
// taken on the log scale, where an interval is close to symmetric.

// AgainstPeers is results.Compare.Against for comparisons whose figures are judged against the
// median of the other figures (GPU to GPU, node to node).
const AgainstPeers = "peers_median"

// Power is the chance with which the detectable slowdown is caught: a figure that much worse has its
// interval clear of the margin in 80 % of runs (the usual minimum-detectable-effect convention).
const Power = 0.80

// Slowdown is how much worse a figure is than its reference, in % (positive = worse; for a
// throughput (ref − x)/ref, for a latency (x − ref)/ref), with what the interval rule decided.
type Slowdown struct {
	Result        string            // Pass, Fail or Inconclusive
	Pct           float64           // the point estimate
	CI            *results.Interval // of Pct (nil when a side has no interval)
	DetectablePct float64           // the smallest slowdown this pair's spread flags with Power (0: unknown)
	Why           string            // for Inconclusive, and for a Pass by a materiality guard
}

// zOf is the normal quantile of a two-sided interval at level (1.96 for 0.95).
func zOf(level float64) float64 {
	if !(level > 0 && level < 1) {
		level = 0.95
	}
	return math.Sqrt2 * math.Erfinv(level)
}

// zPower is the normal quantile of Power.
var zPower = math.Sqrt2 * math.Erfinv(2*Power-1)

// LogSE is the standard error of ln(f.Value), read back from f's confidence interval as if it were
// normal on the log scale; ok is false when f has no usable interval.
func LogSE(f Figure) (se float64, ok bool) {
	c := f.CI
	if c == nil || !(f.Value > 0) || !(c.Lo > 0) || !(c.Hi >= c.Lo) || math.IsInf(c.Hi, 0) {
		return 0, false
	}
	return (math.Log(c.Hi) - math.Log(c.Lo)) / (2 * zOf(c.Level)), true
}

// worseLog is ln of how much worse x is than ref (positive = worse).
func worseLog(x, ref float64, higher bool) float64 {
	if higher {
		return math.Log(ref / x)
	}
	return math.Log(x / ref)
}

// pctOfLog turns a log-scale slowdown back into DeltaPct's %.
func pctOfLog(l float64, higher bool) float64 {
	if higher {
		return (1 - math.Exp(-l)) * 100
	}
	return (math.Exp(l) - 1) * 100
}

// logOfPct is pctOfLog's inverse (a margin in % on the log scale).
func logOfPct(p float64, higher bool) float64 {
	if higher {
		return -math.Log(1 - p/100)
	}
	return math.Log(1 + p/100)
}

// Slower judges x against a reference (its peers' median, a baseline) by the interval rule with a
// margin in %: Pass when within the margin, too small to matter, or with no slowdown in the gap's
// interval; Fail when worse by more than the margin with the interval beyond it; Inconclusive with
// the reason otherwise. A figure with neither samples nor interval is judged on its value alone.
func Slower(metric string, x, ref Figure, higher bool, marginPct float64, g Guards) Slowdown {
	s := gapOf(x, ref, higher, marginPct)
	if x.ClientLimited && ref.ClientLimited {
		// Both set by a load generator that fell behind: neither a gap nor its absence shows
		// anything of the servers, whatever the guards would say of its size.
		s.Result, s.Why = Inconclusive, BothClientLimited
		return s
	}
	if !(s.Pct > marginPct) {
		// Within the margin by its point estimate: a pass only when the reference could show it and
		// the interval of the gap stays inside the margin. Undecided is never ok.
		s.Result, s.Why = withinMargin(metric, x, ref, higher, marginPct, s.CI, g)
		return s
	}
	if why := smallSpread(metric, x, ref, g); why != "" {
		s.Result, s.Why = Pass, why
		return s
	}
	s.Result = Inconclusive
	switch d := Doubt(x, higher && IsThroughputMetric(metric), g.MinSamples); {
	case d != "":
		s.Why = d
	case TooFew(ref, g.MinSamples):
		s.Why = fewRef(ref, g.MinSamples)
	case s.CI == nil && (x.Samples > 0 || ref.Samples > 0 || x.CI != nil || ref.CI != nil):
		s.Why = "no confidence interval behind one of the figures, so the gap cannot be told from noise: a tail percentile gets one only from enough requests (72 for a p95, 368 for a p99: raise load.max_duration or load.max_requests), and results of an old gpuvet carry none"
	case s.CI != nil && !(s.CI.Lo > 0):
		// No evidence of any slowdown: the gap is noise, however it reads. Not a flag, and not
		// undecided either; the comparison's detectable slowdown says how wide the noise was.
		s.Result = Pass
		s.Why = fmt.Sprintf("the gap is inside the noise (its %g %% interval [%.1f %%, %.1f %%] includes none)", s.CI.Level*100, s.CI.Lo, s.CI.Hi)
	case s.CI != nil && !(s.CI.Lo > marginPct):
		s.Why = fmt.Sprintf("the %g %% confidence interval of the gap, [%.1f %%, %.1f %%], reaches within the %g %% margin: %s", s.CI.Level*100, s.CI.Lo, s.CI.Hi, marginPct, Tighten)
	default:
		// Beyond the margin with its interval: the GPU's, unless the engine's longer CPU wait can
		// explain the least the gap may be.
		low := s.Pct
		if s.CI != nil {
			low = s.CI.Lo
		}
		if s.Why = cpuExplains(x, ref, low, marginPct, higher); s.Why == "" {
			s.Result = Fail
		}
	}
	return s
}

// gapOf is x's slowdown against ref with its 95 % interval and the slowdown detectable at the margin:
// block by block where the blocks were aligned (the drift they shared is out of it), else from both
// figures' intervals (no interval when a side has none).
func gapOf(x, ref Figure, higher bool, marginPct float64) Slowdown {
	s := Slowdown{Pct: DeltaPct(x.Value, ref.Value, higher)}
	l, se, t := 0.0, 0.0, zOf(0.95)
	sx, okx := LogSE(x)
	sr, okr := LogSE(ref)
	switch p := x.gap; {
	case p != nil:
		l, se, t = p.log, p.se, p.t
		s.Pct = pctOfLog(l, higher)
	case okx && okr && x.Value > 0 && ref.Value > 0:
		l, se = worseLog(x.Value, ref.Value, higher), math.Hypot(sx, sr)
	default:
		return s
	}
	s.CI = &results.Interval{Lo: pctOfLog(l-t*se, higher), Hi: pctOfLog(l+t*se, higher), Level: 0.95}
	s.DetectablePct = pctOfLog(logOfPct(marginPct, higher)+(t+zPower)*se, higher)
	return s
}

// withinMargin decides a figure whose gap to its reference is within the margin: Pass, unless a side
// has too few requests or the gap's interval reaches past the margin; then Inconclusive, with what
// would decide it. (A client-limited figure within the margin passes: it reads worse than its server.)
func withinMargin(metric string, x, ref Figure, higher bool, marginPct float64, ci *results.Interval, g Guards) (string, string) {
	switch {
	case TooFew(x, g.MinSamples):
		return Inconclusive, NeedMore(x.Samples, g.MinSamples, x.Window)
	case TooFew(ref, g.MinSamples):
		return Inconclusive, "the reference: " + NeedMore(ref.Samples, g.MinSamples, ref.Window)
	case ci != nil && ci.Hi > marginPct && immaterial(metric, ref, ci.Hi, g):
		return Pass, fmt.Sprintf("even at the far end of its interval (%.1f %%) the gap would be below the materiality guard", ci.Hi)
	case ci != nil && ci.Hi > marginPct:
		if why := cpuExplains(x, ref, ci.Hi, marginPct, higher); why != "" {
			return Inconclusive, why // the far end is the host's to answer for
		}
		return Inconclusive, fmt.Sprintf("the %g %% interval of the gap, [%.1f %%, %.1f %%], reaches past the %g %% margin: %s", ci.Level*100, ci.Lo, ci.Hi, marginPct, narrowBy(x, ref, higher, marginPct))
	}
	return Pass, ""
}

// immaterial reports whether a gap of pct % from ref would be too small to matter by the guards
// that stop a flag (min_ttft_delta_ms, min_throughput_req_s).
func immaterial(metric string, ref Figure, pct float64, g Guards) bool {
	switch {
	case IsTTFTMetric(metric) && g.MinTTFTDeltaMs > 0:
		return ref.Value*pct/100 <= g.MinTTFTDeltaMs
	case IsThroughputMetric(metric) && g.MinThroughputReqS > 0 && ref.ReqS > 0:
		return ref.ReqS*pct/100 < g.MinThroughputReqS
	}
	return false
}

// narrowBy says how many more requests would bring the gap's interval inside the margin: its
// width falls as 1/√n, so n must grow by (se/se')², where se' puts the interval's far end on the
// margin.
func narrowBy(x, ref Figure, higher bool, marginPct float64) string {
	sx, okx := LogSE(x)
	sr, okr := LogSE(ref)
	l, m := worseLog(x.Value, ref.Value, higher), logOfPct(marginPct, higher)
	if !okx || !okr || !(m > l) || x.Samples <= 0 {
		return Tighten
	}
	need := zOf(0.95) * math.Hypot(sx, sr) / (m - l)
	n := int(math.Ceil(float64(x.Samples) * need * need))
	return fmt.Sprintf("n=%d per GPU; about %d (%d more requests each, a load.max_duration about %.1f× as long) would narrow it inside the margin", x.Samples, n, n-x.Samples, float64(n)/float64(x.Samples))
}

// BothClientLimited is why a comparison of two client-limited figures decides nothing.
const BothClientLimited = "both figures are client-limited (the load generator, not the servers, set them), so neither a gap nor its absence shows anything: give gpuvet more CPU or run fewer GPUs at once (--parallel-gpus 1) and rerun"

// Peers judges one metric across the cards of a host (or the nodes of a fleet) by the interval rule
// (Slower), each figure against the median of the others with g.VariancePct as the margin; its
// DetectablePct is the smallest slowdown it could have flagged on any card (0 when one cannot show one).
func Peers(metric string, cells []Cell, higherIsBetter bool, g Guards) results.Compare {
	c := results.Compare{Metric: metric, HigherIsBetter: higherIsBetter, VariancePct: g.VariancePct, Against: AgainstPeers}
	cells, _, done := begin(&c, cells, higherIsBetter, g.MinSamples)
	if done {
		return c
	}
	cells = withGaps(cells, higherIsBetter)
	dir := map[bool]string{true: "below", false: "above"}[higherIsBetter]
	detectable, known := 0.0, true
	for i, x := range cells {
		ref := peerMedian(cells, i)
		s := Slower(metric, x.Figure, ref, higherIsBetter, g.VariancePct, g)
		cell := results.CompareCell{GPU: x.GPU, Value: x.Value, DeltaPct: s.Pct, LowerBound: x.LowerBound, Reference: ref.Value, DeltaCI: s.CI}
		// A figure that cannot show a slowdown (client-limited, a lower bound, too few samples)
		// could have caught none: the comparison then states no detectable slowdown.
		if s.DetectablePct > 0 && Doubt(x.Figure, higherIsBetter && IsThroughputMetric(metric), g.MinSamples) == "" {
			detectable = max(detectable, s.DetectablePct)
		} else {
			known = false
		}
		what := fmt.Sprintf("%s %s on gpu %d is %.1f %% %s the median of the other GPUs (%s)%s", metric, Num(x.Value), x.GPU, s.Pct, dir, Num(ref.Value), ciText(s.CI, x.gap != nil))
		switch {
		case decide(&cell, s.Result, s.Why, what, fmt.Sprintf(", beyond the %g %% margin with its interval", g.VariancePct)):
		case s.Pct < 0:
			cell.Reason = fmt.Sprintf("better than the median of the other GPUs (by %.1f %%)", -s.Pct)
		default:
			cell.Reason = fmt.Sprintf("within %g %% of the median of the other GPUs (%.1f %% %s)", g.VariancePct, s.Pct, dir)
		}
		c.Values = append(c.Values, cell)
	}
	if known && !c.LowConfidence {
		c.DetectablePct = math.Round(detectable*10) / 10
	}
	return c
}

func ciText(c *results.Interval, byBlock bool) string {
	if c == nil {
		return ""
	}
	how := ""
	if byBlock {
		how = " block by block"
	}
	return fmt.Sprintf(", %g %% interval of the gap%s [%.1f %%, %.1f %%]", c.Level*100, how, c.Lo, c.Hi)
}

// peerMedian is the reference of cell i: the median of the other cells' figures, with an interval
// whose log-scale standard error is the root mean square of theirs shrunk as a median's is (1 peer:
// its own; 2: ÷√2; more: √(π/2)/√k, the large-sample factor, which errs wide for few). It is as
// doubtful as its most doubtful member, with the fewest samples of them.
func peerMedian(cells []Cell, i int) Figure {
	var vals, reqs, waits []float64
	var sum2 float64
	all := true
	ref := Figure{Samples: -1}
	for j, c := range cells {
		if j == i {
			continue
		}
		vals, reqs = append(vals, c.Value), append(reqs, c.ReqS)
		se, ok := LogSE(c.Figure)
		all = all && ok
		sum2 += se * se
		if c.Samples > 0 && (ref.Samples < 0 || c.Samples < ref.Samples) {
			ref.Samples = c.Samples
		}
		ref.LowerBound = ref.LowerBound || c.LowerBound
		ref.ClientLimited = ref.ClientLimited || c.ClientLimited
		if c.CPUWait != nil {
			waits = append(waits, *c.CPUWait)
		}
	}
	if len(waits) > 0 {
		w := Median(waits)
		ref.CPUWait = &w
	}
	ref.Samples = max(ref.Samples, 0)
	ref.Value, ref.ReqS = Median(vals), Median(reqs)
	if !all || !(ref.Value > 0) {
		return ref
	}
	k := float64(len(vals))
	shrink := 1.0
	switch {
	case k == 2:
		shrink = 1 / math.Sqrt2
	case k > 2:
		shrink = math.Sqrt(math.Pi/2) / math.Sqrt(k)
	}
	// Its interval: ±z of that standard error on the log scale.
	se, z := math.Sqrt(sum2/k)*shrink, zOf(0.95)
	ref.CI = &results.Interval{Lo: ref.Value * math.Exp(-z*se), Hi: ref.Value * math.Exp(z*se), Level: 0.95}
	return ref
}

// Median is the median of v (0 for none); v is not changed.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// MedianOf is the median of several figures as one figure, with the interval peerMedian gives a
// reference (a node's figure from its GPUs' figures).
func MedianOf(figs []Figure) Figure {
	cells := make([]Cell, len(figs)+1)
	for i, f := range figs {
		cells[i+1] = Cell{Figure: f}
	}
	return peerMedian(cells, 0)
}

// RunSpread is how far a figure moves from run to run on one node, from its values in N earlier
// runs: their standard deviation as a % of their mean, and Student's t 0.975 for N − 1 d.f.
type RunSpread struct {
	N     int
	SDPct float64
	T     float64
}

// RunToRun is the spread of values, a figure's value in each of a node's earlier runs (at least
// 3, at most 11; ok false otherwise, or when one measured nothing).
func RunToRun(values []float64) (RunSpread, bool) {
	n := len(values)
	t := metrics.StudentT975(n - 1)
	if n < 3 || t == 0 {
		return RunSpread{}, false
	}
	var mean float64
	for _, v := range values {
		if !(v > 0) || math.IsInf(v, 0) {
			return RunSpread{}, false
		}
		mean += v / float64(n)
	}
	var ss float64
	for _, v := range values {
		ss += (v - mean) * (v - mean)
	}
	return RunSpread{N: n, SDPct: math.Sqrt(ss/float64(n-1)) / mean * 100, T: t}, true
}

// NextPct is the half-width of the 95 % prediction interval of one more run, as a % of the mean:
// t × sd × √(1 + 1/N).
func (r RunSpread) NextPct() float64 { return r.T * r.SDPct * math.Sqrt(1+1/float64(r.N)) }

// GapPct is the half-width of the 95 % interval of the gap between two single runs of the node
// (this one and its acceptance): t × sd × √2.
func (r RunSpread) GapPct() float64 { return r.T * r.SDPct * math.Sqrt2 }
