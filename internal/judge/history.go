package judge

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// CheckDrift is the check of a figure worse than the same figure of its node's or GPU's acceptance
// run; "history." checks are the judge's own, rewritten by every Apply.
const (
	CheckDrift         = "history.drift"
	checkHistoryPrefix = "history."
)

// Non-judged figures kept for trends (power, energy, speed-of-light, clocks): no interval, and
// they move with the load as much as with the card.
const (
	MetricPowerMeanW     = "power_mean_w"
	MetricTokensPerJoule = "tokens_per_joule"
	MetricSOLPct         = "sol_pct"
	MetricBurnTFLOPS     = "burn_tflops"
	MetricBurnPowerW     = "burn_power_mean_w"
	MetricBurnMinClock   = "burn_min_sm_clock_mhz"
)

// KeyFigures are the figures of one host the history keeps, per GPU UUID (a tp group's under each of
// its GPUs): the microbenchmarks and burn, and per model every LLMMetrics figure with what compare
// needs, plus power, tok/J and % SOL. Judged marks those compared with the acceptance run, never
// those of a GPU not gpuvet's alone.
func KeyFigures(h *results.Host) []results.StoredFigure {
	var out []results.StoredFigure
	uuidOf := map[int]string{}
	for _, g := range h.Discovery.GPUs {
		uuidOf[g.Index] = g.UUID
	}
	if h.Health != nil {
		for _, g := range h.Health.GPUs {
			if g.GPU.UUID != "" {
				uuidOf[g.GPU.Index] = g.GPU.UUID
			}
			out = append(out, healthFigures(g)...)
		}
	}
	for _, m := range h.Models {
		for _, ep := range m.Endpoints {
			if ep.Load == nil || ep.Status == results.StatusFailed || len(ep.Load.Runs) == 0 {
				continue
			}
			out = append(out, underEachGPU(endpointFigures(m.Model, &ep), ep.GPUs, uuidOf)...)
		}
	}
	return out
}

// healthFigures are one GPU's measured microbenchmarks and burn (its power and clock for trends only).
func healthFigures(g results.GPUHealth) []results.StoredFigure {
	var out []results.StoredFigure
	busy := g.Busy != nil
	for _, b := range g.Bench {
		if b.Error != "" || !(b.Value > 0) {
			continue
		}
		out = append(out, results.StoredFigure{UUID: g.GPU.UUID, Metric: b.Name, Unit: b.Unit, Value: b.Value,
			HigherIsBetter: true, Judged: !busy && !b.Busy})
	}
	if bu := g.Burn; bu != nil && bu.Error == "" {
		for _, f := range []results.StoredFigure{
			{Metric: MetricBurnTFLOPS, Unit: "TFLOP/s", Value: bu.TFLOPS, HigherIsBetter: true, Judged: !busy},
			{Metric: MetricBurnPowerW, Unit: "W", Value: bu.PowerMeanW},
			{Metric: MetricBurnMinClock, Unit: "MHz", Value: float64(bu.MinSMClockMHz), HigherIsBetter: true},
		} {
			if f.Value > 0 {
				f.UUID = g.GPU.UUID
				out = append(out, f)
			}
		}
	}
	return out
}

// underEachGPU files an endpoint's figures under each of its GPUs' UUIDs (none: under no UUID).
func underEachGPU(figs []results.StoredFigure, gpus []int, uuidOf map[int]string) []results.StoredFigure {
	uuids := make([]string, 0, len(gpus))
	for _, i := range gpus {
		uuids = append(uuids, uuidOf[i])
	}
	if len(uuids) == 0 {
		uuids = []string{""}
	}
	var out []results.StoredFigure
	for _, u := range uuids {
		for _, f := range figs {
			f.UUID = u
			out = append(out, f)
		}
	}
	return out
}

// endpointFigures are one endpoint's LLM figures (UUID left to the caller).
func endpointFigures(model string, ep *results.Endpoint) []results.StoredFigure {
	var out []results.StoredFigure
	busy := len(ep.Busy) > 0
	for _, met := range LLMMetrics {
		f, ok := met.Get(ep.Load)
		if !ok || !(f.Value > 0) {
			continue
		}
		f = acrossRuns(ep.Load, met.Name, f) // a later run is another run
		out = append(out, results.StoredFigure{Model: model, Metric: met.Name, Unit: metricUnit(met.Name), Value: f.Value, CI: f.CI,
			Samples: f.Samples, HigherIsBetter: met.HigherIsBetter, LowerBound: f.LowerBound, ClientLimited: f.ClientLimited,
			ReqS: f.ReqS, Judged: !met.BaselineOnly && !busy && !tail(met.Name), SpreadPct: spreadOf(ep.Load, met.Name)})
	}
	if p := ep.Power; p != nil {
		if p.MeanW > 0 {
			out = append(out, results.StoredFigure{Model: model, Metric: MetricPowerMeanW, Unit: "W", Value: p.MeanW})
		}
		if p.TokensPerJoule > 0 {
			out = append(out, results.StoredFigure{Model: model, Metric: MetricTokensPerJoule, Unit: "tok/J", Value: p.TokensPerJoule, HigherIsBetter: true})
		}
	}
	if s := ep.SpeedOfLight; s != nil && s.Percent > 0 {
		out = append(out, results.StoredFigure{Model: model, Metric: MetricSOLPct, Unit: "%", Value: s.Percent, HigherIsBetter: true})
	}
	return out
}

// tail says a figure is a tail percentile (p95, p99): kept for trends, not judged against the
// acceptance run. Across runs a tail moves with what else the host did (timer slack, interrupts),
// which its interval cannot see: a simulated node 5 % slower read 11 % worse in ITL p95, 5.4 % in
// median TPOT.
func tail(metric string) bool {
	return strings.Contains(metric, "p95") || strings.Contains(metric, "p99")
}

func metricUnit(metric string) string {
	switch {
	case strings.HasSuffix(metric, "req_s"):
		return "req/s"
	case strings.Contains(metric, "tok_s"):
		return "tok/s"
	}
	return "ms"
}

// FigureKey names a figure within one GPU or node: "MODEL metric", or the metric of a health figure.
func FigureKey(f results.StoredFigure) string {
	if f.Model == "" {
		return f.Metric
	}
	return f.Model + " " + f.Metric
}

func asFigure(f results.StoredFigure) compare.Figure {
	return compare.Figure{Value: f.Value, CI: f.CI, Samples: f.Samples, LowerBound: f.LowerBound, ClientLimited: f.ClientLimited, ReqS: f.ReqS}
}

// driftGuards are the guards of one figure against its acceptance, with the history's margin: the
// LLM noise guards for an LLM figure, none for a health figure (no requests behind it).
func driftGuards(f results.StoredFigure, cfg Config, margin float64) compare.Guards {
	var g compare.Guards
	if f.Model != "" {
		g = cfg.LLMGuardsFrom()
	}
	g.VariancePct = margin
	return g
}

// applyDrift compares every judged figure of host h with its acceptance runs' (s.History): each GPU
// against its own (by UUID, so a GPU that moved node keeps it), the node (its GPUs' median) against
// the node's, by compare.Slower with history.drift_pct as the margin. A drift flags the GPU's
// endpoint (or health record) or the node; each is kept in s.History.Drift.
func applyDrift(s *results.Summary, h *results.Host, cfg Config) {
	hist := s.History
	if hist == nil {
		return
	}
	ours := func(check string) bool { return strings.HasPrefix(check, checkHistoryPrefix) }
	h.Flags = dropFlags(h.Flags, ours)
	if h.Health != nil {
		for gi := range h.Health.GPUs {
			h.Health.GPUs[gi].Flags = dropFlags(h.Health.GPUs[gi].Flags, ours)
		}
	}
	hist.Drift = slices.DeleteFunc(hist.Drift, func(d results.Drift) bool { return d.Host == h.Name })
	if len(hist.Acceptance) == 0 {
		return
	}
	margin := val(cfg.DriftPct)
	hist.DriftPct, hist.DriftPctSource = margin, cfg.DriftPct.Source
	if margin <= 0 {
		return
	}
	cur := KeyFigures(h)
	for _, a := range hist.Acceptance {
		switch {
		case a.Scope == "gpu":
			gpuDrift(s, h, a, cur, cfg, margin)
		case a.Scope == "node" && a.Host == h.Name:
			nodeDrift(s, h, a, cur, cfg, margin)
		}
	}
	for mi := range h.Models {
		m := &h.Models[mi]
		for ei := range m.Endpoints {
			ep := &m.Endpoints[ei]
			ep.Status = endpointStatus(ep)
			m.Status = results.Worse(m.Status, ep.Status)
		}
	}
}

func gpuDrift(s *results.Summary, h *results.Host, a results.Acceptance, cur []results.StoredFigure, cfg Config, margin float64) {
	i := slices.IndexFunc(h.Discovery.GPUs, func(g results.GPUInfo) bool { return g.UUID == a.UUID })
	if i < 0 {
		return // the GPU is not on this host in this run
	}
	gpu := h.Discovery.GPUs[i].Index
	ref := map[string]results.StoredFigure{}
	for _, f := range a.Figures {
		if f.UUID == a.UUID {
			ref[FigureKey(f)] = f
		}
	}
	own := ownSeries(a.Earlier, a.UUID)
	seen := map[string]bool{}
	for _, x := range cur {
		r, ok := ref[FigureKey(x)]
		if x.UUID != a.UUID || !x.Judged || !ok || seen[FigureKey(x)] {
			continue
		}
		seen[FigureKey(x)] = true
		d := unrepeated(driftOf("gpu", h.Name, gpu, x, asFigure(x), asFigure(r), a, cfg, margin), x.SpreadPct, margin)
		d = againstOwnRuns(d, own[FigureKey(x)], margin)
		d.UUID = a.UUID
		s.History.Drift = append(s.History.Drift, d)
		if d.Result != string(results.StatusFlag) {
			continue
		}
		fl := results.Flag{Scope: "gpu", Check: CheckDrift, Reason: d.Reason}
		if x.Model == "" {
			if h.Health != nil {
				for gi := range h.Health.GPUs {
					if g := &h.Health.GPUs[gi]; g.GPU.UUID == a.UUID {
						fl.Subject = fmt.Sprintf("gpu %d (%s)", gpu, a.UUID)
						g.Flags = append(g.Flags, fl)
					}
				}
			}
			continue
		}
		for mi := range h.Models {
			m := &h.Models[mi]
			if m.Model != x.Model {
				continue
			}
			if ep := endpointOnGPU(m, gpu); ep != nil {
				fl.Subject = subject(m.Model, ep)
				ep.Flags = append(ep.Flags, fl)
			}
		}
	}
}

func nodeDrift(s *results.Summary, h *results.Host, a results.Acceptance, cur []results.StoredFigure, cfg Config, margin float64) {
	now := byFigure(cur, func(f results.StoredFigure) bool { return f.Judged })
	then := byFigure(a.Figures, nil)
	own := ownSeries(a.Earlier, "")
	for _, k := range slices.Sorted(maps.Keys(now)) {
		ref, ok := then[k]
		if !ok {
			continue
		}
		spread := 0.0 // the widest over the node's GPUs, now and then
		for _, f := range append(slices.Clone(now[k]), ref...) {
			spread = max(spread, f.SpreadPct)
		}
		x := now[k][len(now[k])-1]
		d := unrepeated(driftOf("node", h.Name, -1, x, medianFigure(now[k]), medianFigure(ref), a, cfg, margin), spread, margin)
		d = againstOwnRuns(d, own[k], margin)
		s.History.Drift = append(s.History.Drift, d)
		if d.Result == string(results.StatusFlag) {
			h.Flags = append(h.Flags, results.Flag{Scope: "host", Subject: h.Name, Check: CheckDrift, Reason: d.Reason})
		}
	}
}

// byFigure groups the figures keep admits (nil: all) by FigureKey, a tp group's figure (stored under
// each of its GPUs) once.
func byFigure(figs []results.StoredFigure, keep func(results.StoredFigure) bool) map[string][]results.StoredFigure {
	out, seen := map[string][]results.StoredFigure{}, map[string]bool{}
	for _, f := range figs {
		k := FigureKey(f)
		if keep != nil && !keep(f) || seen[f.UUID+"\x00"+k] {
			continue
		}
		seen[f.UUID+"\x00"+k] = true
		out[k] = append(out[k], f)
	}
	return out
}

// medianFigure is the node's figure: the median over its GPUs' (compare.MedianOf).
func medianFigure(figs []results.StoredFigure) compare.Figure {
	cs := make([]compare.Figure, len(figs))
	for i, f := range figs {
		cs[i] = asFigure(f)
	}
	return compare.MedianOf(cs)
}

// spreadOf is how far metric spread between the blocks of load l's synchronous rung; a figure not
// measured in blocks (the ladder's throughputs) carries the engine's speed's spread (0: no blocks).
func spreadOf(l *results.Load, metric string) float64 {
	r := FindRun(l, RunSynchronous)
	if r == nil {
		return 0
	}
	if f := r.Repeat.Figure(metric); f != nil {
		return f.SpreadPct
	}
	if f := r.Repeat.Figure(speedFigure); f != nil {
		return f.SpreadPct
	}
	return 0
}

// unrepeated keeps a drift of a figure that did not repeat within its own run (its blocks spread
// spreadPct, more than the margin) as reported, not gated: it cannot say its node slowed by the margin.
func unrepeated(d results.Drift, spreadPct, margin float64) results.Drift {
	if d.Result != string(results.StatusFlag) || !(spreadPct > margin) {
		return d
	}
	d.Result = string(results.StatusInconclusive)
	d.Reason += fmt.Sprintf("; reported, not gated: the figure did not repeat within this run (its blocks spread %.1f %%, past the %g %% margin), so its gap to another run is the engine's drift as much as the node's; the health figures and the throughputs judge the node", spreadPct, margin)
	return d
}

// ownSeries is each figure's value in each of the earlier runs, newest first: one GPU's (uuid), or
// the node's median over its GPUs (uuid "").
func ownSeries(runs []results.EarlierRun, uuid string) map[string][]float64 {
	out := map[string][]float64{}
	for _, r := range runs {
		for k, figs := range byFigure(r.Figures, func(f results.StoredFigure) bool { return uuid == "" || f.UUID == uuid }) {
			out[k] = append(out[k], medianFigure(figs).Value)
		}
	}
	return out
}

// againstOwnRuns weighs a drift against how far the figure moves between this node's runs (series:
// its earlier ok or inconclusive runs, from three on): a flag stands only past the margin by that
// spread too, and a figure that moves more than the margin is reported, not gated.
func againstOwnRuns(d results.Drift, series []float64, margin float64) results.Drift {
	sp, ok := compare.RunToRun(series)
	if !ok {
		return d
	}
	d.OwnRuns, d.OwnSpreadPct = sp.N, sp.NextPct()
	if d.Result != string(results.StatusFlag) {
		return d
	}
	over := fmt.Sprintf("over this node's last %d runs the figure moved ±%.1f %% from run to run (95 %% prediction interval of a run)", sp.N, sp.NextPct())
	switch lo := d.DeltaPct - sp.GapPct(); {
	case sp.NextPct() > margin:
		d.Result = string(results.StatusInconclusive)
		d.Reason += "; reported, not gated: " + over + fmt.Sprintf(", past the %g %% margin; it is gated again once its runs repeat within the margin", margin)
	case !(lo > margin):
		d.Result = string(results.StatusInconclusive)
		d.Reason += "; not decided: " + over + fmt.Sprintf(", so a gap between two runs reaches down to %.1f %%, within the %g %% margin: rerun to see whether it holds", lo, margin)
	default:
		d.Reason += "; past its own run-to-run spread too (" + over + ")"
	}
	return d
}

// driftOf judges one figure against its acceptance figure by the interval rule.
func driftOf(scope, host string, gpu int, proto results.StoredFigure, x, ref compare.Figure, a results.Acceptance, cfg Config, margin float64) results.Drift {
	sl := compare.Slower(proto.Metric, x, ref, proto.HigherIsBetter, margin, driftGuards(proto, cfg, margin))
	d := results.Drift{Scope: scope, Host: host, GPU: gpu, Model: proto.Model, Metric: proto.Metric, Value: x.Value, ValueCI: x.CI,
		Reference: ref.Value, ReferenceCI: ref.CI, DeltaPct: sl.Pct, DeltaCI: sl.CI, DetectablePct: sl.DetectablePct,
		AcceptanceRun: a.RunID, AcceptanceAt: a.At}
	who := "node " + host
	if scope == "gpu" {
		who = fmt.Sprintf("gpu %d (%s) on %s", gpu, a.UUID, host)
	}
	what := fmt.Sprintf("%s of %s is %s, %.1f %% %s its acceptance run %s of %s (%s)%s", FigureKey(proto), who, compare.Num(x.Value),
		sl.Pct, map[bool]string{true: "below", false: "above"}[proto.HigherIsBetter], a.RunID, a.At.UTC().Format("2006-01-02 15:04 UTC"),
		compare.Num(ref.Value), gapText(sl.CI))
	switch sl.Result {
	case compare.Fail:
		d.Result = string(results.StatusFlag)
		how := "with its interval"
		if sl.CI == nil {
			how = "(a figure without an interval, judged on its value)"
		}
		d.Reason = what + fmt.Sprintf(", beyond the %g %% drift margin %s: the node has slowed against itself (cooling, power, firmware, driver): compare its clocks and power with the acceptance run's", margin, how)
	case compare.Inconclusive:
		d.Result = string(results.StatusInconclusive)
		d.Reason = what + ": not decided: " + sl.Why
	default:
		d.Result = "pass"
		d.Reason = fmt.Sprintf("within %g %% of its acceptance run %s (%.1f %%)", margin, a.RunID, sl.Pct)
		if sl.Why != "" {
			d.Reason += ": " + sl.Why
		}
	}
	return d
}

func gapText(c *results.Interval) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf(", 95 %% interval of the gap [%.1f %%, %.1f %%]", c.Lo, c.Hi)
}
