package judge

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Run kinds the judge looks for in results.Load.Runs.
const (
	RunSynchronous = "synchronous" // the sync run: SLO gates and sync latency comparisons
	RunConcurrency = "concurrency" // the aicr-style fixed-concurrency run
)

// Check ids the judge writes; flags with these prefixes are rewritten by every Apply (idempotence).
const (
	CheckGPUToGPU     = "compare.gpu_to_gpu"
	CheckBaseline     = "baseline.overhead"
	CheckLoadPartial  = "judge.load_partial"
	checkGatePrefix   = "gate."
	checkJudgePrefix  = "judge."
	checkFunctPrefix  = "functional."
	checkCompPrefix   = "compare."
	checkBaselnPrefix = "baseline."
)

func judgeOwned(check string) bool {
	return check == CheckPrefixCache || slices.ContainsFunc([]string{checkGatePrefix, checkJudgePrefix, checkFunctPrefix, checkCompPrefix,
		checkBaselnPrefix, checkHistoryPrefix}, func(p string) bool { return strings.HasPrefix(check, p) })
}

// Apply judges a whole summary in place: gate verdicts, GPU-to-GPU comparisons per model, flags,
// baseline breaches (when s.Baseline is set) and the roll-up per endpoint, model, host and run; the
// health phase's flags and statuses are rolled up as they are. Running it twice gives the same result.
func Apply(s *results.Summary, cfg Config) {
	if s == nil {
		return
	}
	if s.Meta.Thresholds == nil {
		s.Meta.Thresholds = map[string]results.Threshold{}
	}
	maps.Copy(s.Meta.Thresholds, cfg.Thresholds())
	for hi := range s.Hosts {
		h := &s.Hosts[hi]
		healthy, braked := healthyGPUs(h), brakedGPUs(h)
		for mi := range h.Models {
			applyModel(&h.Models[mi], cfg, hostGPUCount(h), s.Meta.ParallelGPUs > 1, healthy, braked)
		}
		applyDrift(s, h, cfg)
		classifyHost(h)
		h.GPUs = gpuVerdicts(h)
		rollHost(h)
	}
	rollRun(s)
	rollFindings(s)
}

// hostGPUCount is how many GPUs the host has: discovered, else measured by health, else served.
func hostGPUCount(h *results.Host) int {
	if n := len(h.Discovery.GPUs); n > 0 {
		return n
	}
	if h.Health != nil && len(h.Health.GPUs) > 0 {
		return len(h.Health.GPUs)
	}
	seen := map[int]bool{}
	for _, m := range h.Models {
		for _, ep := range m.Endpoints {
			for _, g := range ep.GPUs {
				seen[g] = true
			}
		}
	}
	return len(seen)
}

// applyModel judges one model's endpoints; healthy (the GPUs that passed their own health checks)
// tells a gate the engine missed from one the GPU missed (gateLayers), braked (the GPUs the power
// brake slowed at the health phase) one the host's power did (brakeLayers).
func applyModel(m *results.Model, cfg Config, hostGPUs int, parallel bool, healthy, braked map[int]bool) {
	for ei := range m.Endpoints {
		judgeEndpoint(m, &m.Endpoints[ei], cfg, hostGPUs)
	}
	m.Comparisons = ModelComparisons(m, cfg.LLMGuardsFrom(), parallel)
	flagComparisons(m)
	greedyAgreement(m)
	contextFlags(m)
	preemptionFlags(m)
	for ei := range m.Endpoints {
		telemetryFlags(m.Model, &m.Endpoints[ei])
		markSOL(&m.Endpoints[ei])
		gateLayers(&m.Endpoints[ei], healthy, val(cfg.LLMVariancePct))
		brakeLayers(&m.Endpoints[ei], braked)
	}
	m.Flags = dropFlags(m.Flags, judgeOwned)
	m.Status = modelStatus(m)
}

// judgeEndpoint applies the gates, the expected figures and the error rates to one endpoint, and
// flags what failed.
func judgeEndpoint(m *results.Model, ep *results.Endpoint, cfg Config, hostGPUs int) {
	ep.Flags = dropFlags(ep.Flags, judgeOwned)
	ep.Verdicts = EndpointVerdicts(ep, m.Model, hostGPUs, cfg)
	if xv := expectedVerdict(ep, m, servedPeers(m) > 1, cfg); xv != nil {
		ep.Verdicts = append(ep.Verdicts, *xv)
	}
	// Every failed request names its layer; the error-rate gate judges the GPU's only, and a
	// fault of the engine, the network or the client leaves the GPU inconclusive (faults.go).
	ep.Faults = Faults(ep)
	okN, gpuBad, gpuKinds := gpuErrorCounts(ep, ep.Faults)
	errV := errorRateVerdict(okN, gpuBad, gpuKinds, cfg.MaxErrorRatePct)
	if errV != nil {
		if gpuBad > 0 {
			errV.Reason += "; " + ep.Faults[0].Reason // the GPU's layer comes first
		}
		if n := notGPUErrors(ep.Faults); n > 0 {
			errV.Reason += fmt.Sprintf("; %d more failed request(s) are not the GPU's (their layer's verdict says whose)", n)
		}
		ep.Verdicts = append(ep.Verdicts, *errV)
	}
	ep.Verdicts = append(ep.Verdicts, faultVerdicts(ep.Faults, okN+gpuBad+notGPUErrors(ep.Faults), cfg.MaxErrorRatePct)...)
	engineFaultUndecides(ep)
	busyVerdicts(m.Model, ep)
	endpointFlags(m.Model, ep, gpuBad, gpuKinds, errV)
}

// endpointFlags turns an endpoint's failed verdicts and other findings into flags.
func endpointFlags(model string, ep *results.Endpoint, gpuBad int, gpuKinds map[string]int, errV *results.Verdict) {
	subj := subject(model, ep)
	for _, v := range ep.Verdicts {
		if v.Result == ResultFail {
			fails := v.Check == CheckErrorRate || v.Check == CheckEngineFault || v.Check == CheckNetworkFault
			ep.Flags = append(ep.Flags, results.Flag{Scope: "gpu", Subject: subj, Check: v.Check, Reason: v.Reason, Fails: fails})
		}
	}
	ep.Flags = append(ep.Flags, faultFlags(subj, ep.Faults, ep.Verdicts)...)
	for i := range ep.Flags {
		if f := &ep.Flags[i]; f.Check == CheckEngineFault && strings.Contains(f.Reason, deviceFaultWords) {
			f.Action = results.ActionRerun // a device fault: a fresh engine decides, not a fix (deviceFaultWords)
		}
	}
	if fl := loadErrorFlag(subj, gpuBad, gpuKinds, errV); fl != nil {
		ep.Flags = append(ep.Flags, *fl)
	}
	ep.Flags = append(ep.Flags, functionalFlags(model, ep)...)
	if why := PrefixCacheMissing(ep.Load); why != "" {
		ep.Flags = append(ep.Flags, results.Flag{Scope: "gpu", Subject: subj, Check: CheckPrefixCache, Reason: why})
	}
	if ep.Load != nil && ep.Load.Error != "" && len(ep.Load.Runs) > 0 && !EngineFaulted(ep) { // an engine fault: its verdict says why
		ep.Flags = append(ep.Flags, results.Flag{Scope: "gpu", Subject: subj, Check: CheckLoadPartial,
			Reason: fmt.Sprintf("the load stopped early (%s); the figures cover only the runs that finished: rerun to complete them", ep.Load.Error)})
	}
}

// flagComparisons flags the endpoint behind each GPU-to-GPU figure that stood out.
func flagComparisons(m *results.Model) {
	for _, c := range m.Comparisons {
		for _, cell := range c.Values {
			if !cell.Flagged {
				continue
			}
			if ep := endpointOnGPU(m, cell.GPU); ep != nil {
				ep.Flags = append(ep.Flags, results.Flag{Scope: "gpu", Subject: subject(m.Model, ep), Check: CheckGPUToGPU, Reason: cell.Reason})
			}
		}
	}
}

// modelStatus settles each endpoint's status and the model's: the worst of them, failed when the
// model broke, flag on a model flag, not ok while a comparison could not decide.
func modelStatus(m *results.Model) results.Status {
	st := results.StatusSkipped
	for ei := range m.Endpoints {
		ep := &m.Endpoints[ei]
		ep.Status = endpointStatus(ep)
		st = results.Worse(st, ep.Status)
	}
	if m.Error != "" {
		st = results.StatusFailed
	}
	if len(m.Flags) > 0 {
		st = results.Worse(st, results.StatusFlag)
	}
	if comparisonsUndecided(m.Comparisons) && st == results.StatusOK {
		st = results.StatusInconclusive
	}
	return st
}

// servedPeers is how many of a model's endpoints have figures a comparison can use.
func servedPeers(m *results.Model) int {
	n := 0
	for i := range m.Endpoints {
		e := &m.Endpoints[i]
		if e.Load != nil && len(e.Load.Runs) > 0 && e.Error == "" && !SharedGPU(e) {
			n++
		}
	}
	return n
}

// dropFlags is fl without the flags whose check drop names (nil when none is left).
func dropFlags(fl []results.Flag, drop func(check string) bool) []results.Flag {
	var out []results.Flag
	for _, x := range fl {
		if !drop(x.Check) {
			out = append(out, x)
		}
	}
	return out
}

func subject(model string, ep *results.Endpoint) string {
	return fmt.Sprintf("%s on %s", model, gpuList(ep.GPUs))
}

func gpuList(g []int) string {
	if len(g) == 0 {
		return "the endpoint" // an endpoint run: gpuvet does not know its GPUs
	}
	if len(g) == 1 {
		return fmt.Sprintf("gpu %d", g[0])
	}
	parts := make([]string, len(g))
	for i, x := range g {
		parts[i] = fmt.Sprint(x)
	}
	return "gpus " + strings.Join(parts, ",")
}

// endpointGPU is the GPU index that stands for an endpoint in comparisons (the first of a tp group).
func endpointGPU(ep *results.Endpoint, i int) int {
	if len(ep.GPUs) > 0 {
		return ep.GPUs[0]
	}
	return i
}

func endpointOnGPU(m *results.Model, gpu int) *results.Endpoint {
	for i := range m.Endpoints {
		if endpointGPU(&m.Endpoints[i], i) == gpu {
			return &m.Endpoints[i]
		}
	}
	return nil
}

// endpointStatus: failed when the work broke, flag when any signal fired, ok when measured.
func endpointStatus(ep *results.Endpoint) results.Status {
	measured := ep.Load != nil || ep.Functional != nil
	switch {
	case ep.Status == results.StatusInterrupted || ep.Status == results.StatusNotRun:
		return ep.Status // the run stopped: what was measured is partial, never ok
	case ep.Disruption != "" && len(ep.Flags) == 0:
		return results.StatusInconclusive // stopped by something outside the hardware: run again
	case ep.Disruption != "":
		return results.StatusFlag // what it measured before it was stopped fired
	case workBroke(ep):
		return results.StatusFailed
	case len(ep.Flags) > 0:
		return results.StatusFlag
	case measured && undecided(ep):
		return results.StatusInconclusive // measured, nothing fired, but not a pass either
	case measured:
		return results.StatusOK
	case ep.Status == "":
		return results.StatusSkipped
	}
	return ep.Status
}

// workBroke says the endpoint's work failed: it errored, its load measured nothing, its API suite
// could not run, or a gate that fails the endpoint (not its GPU) did: the error rate (so too many
// errors exit non-zero without --fail-on-flag), or the engine's or network's past the error limit.
func workBroke(ep *results.Endpoint) bool {
	return ep.Error != "" || ep.Status == results.StatusFailed ||
		ep.Load != nil && ep.Load.Error != "" && len(ep.Load.Runs) == 0 ||
		ep.Functional != nil && ep.Functional.Error != "" ||
		slices.ContainsFunc(ep.Verdicts, func(v results.Verdict) bool {
			return v.Result == ResultFail && (v.Check == CheckErrorRate || v.Check == CheckEngineFault || v.Check == CheckNetworkFault)
		})
}

// functionalFlags flags every failed conformance test (seed: a misbehaving API flags the model).
func functionalFlags(model string, ep *results.Endpoint) []results.Flag {
	if ep.Functional == nil || ep.Functional.Error != "" {
		return nil
	}
	var out []results.Flag
	for _, t := range ep.Functional.Tests {
		if t.Passed {
			continue
		}
		r := fmt.Sprintf("API conformance test %s failed", t.Name)
		if t.Detail != "" {
			r += ": " + t.Detail
		}
		out = append(out, results.Flag{Scope: "model", Subject: subject(model, ep), Check: checkFunctPrefix + t.Name,
			Reason: r + "; check the engine version and its OpenAI-compatible server flags"})
	}
	return out
}

// FindRun returns the run of a kind; for several, the one with the highest concurrency (the aicr
// run is one fixed concurrency), else the last. Nil when there is none.
func FindRun(l *results.Load, kind string) *results.Run {
	if l == nil {
		return nil
	}
	var r *results.Run
	for i := range l.Runs {
		x := &l.Runs[i]
		if x.Kind == kind && (r == nil || x.Concurrency >= r.Concurrency) {
			r = x
		}
	}
	return r
}

// EndpointVerdicts applies every gate resolved for the endpoint's GPU × model; hostGPUs (the host's
// GPU count) normalizes a node-wide aicr throughput floor per GPU.
func EndpointVerdicts(ep *results.Endpoint, model string, hostGPUs int, cfg Config) []results.Verdict {
	if ep.Load == nil {
		return nil
	}
	g := cfg.GatesFor(ep.GPUName, model)
	l := ep.Load
	lb := l.Saturation.LowerBound()
	sync, conc := FindRun(l, RunSynchronous), FindRun(l, RunConcurrency)

	tol := val(cfg.AICRTolerancePct)
	aicr := func(key string, factor float64) GateSpec { // an aicr gate: its limit × the tolerance
		s := g.spec(key)
		s.Factor = factor
		if s.Limit.Value != nil {
			s.FactorNote = fmt.Sprintf("%g × %s, aicr %g %% tolerance", factor, fmtNum(*s.Limit.Value), tol)
		}
		return s
	}
	aicrThr, aicrTTFT := aicr(results.ThAICRMinOutputTokS, 1-tol/100), aicr(results.ThAICRMaxTTFTP99Ms, 1+tol/100)
	if aicrThr.Limit.Value != nil {
		epGPUs := max(len(ep.GPUs), 1)
		switch n := cmp.Or(cfg.AICRNodeGPUs, hostGPUs); {
		case cfg.AICRThroughputScope == ScopeGPU:
			if epGPUs > 1 {
				aicrThr.Factor *= float64(epGPUs)
				aicrThr.FactorNote += fmt.Sprintf(", per-GPU floor × %d GPUs", epGPUs)
			}
		case n > 0:
			aicrThr.Factor *= float64(epGPUs) / float64(n)
			aicrThr.FactorNote += fmt.Sprintf(", node floor over %d GPUs scaled to %d", n, epGPUs)
		}
	}

	n := int(val(cfg.CompareMinSamples))
	vs := []results.Verdict{
		JudgeGate(g.spec(results.ThTTFTP95Ms),
			distMeasure(sync, RunSynchronous, func(r *results.Run) (results.Dist, *results.Interval) { return r.TTFT, r.AcrossRuns(MetricTTFTP95) }, p95, lb, l), n),
		JudgeGate(g.spec(results.ThITLP95Ms),
			distMeasure(sync, RunSynchronous, func(r *results.Run) (results.Dist, *results.Interval) { return r.ITL, r.AcrossRuns(MetricITLP95) }, p95, lb, l), n),
		JudgeGate(g.spec(results.ThMinThroughputReqS), sustainedMeasure(l), n),
		JudgeGate(aicrThr, concThroughput(conc, l), n),
		JudgeGate(aicrTTFT,
			distMeasure(conc, RunConcurrency, concTTFT, p99, false, l), n),
	}
	rungUndecided(vs[0:2], sync, "was", sync.CutReason())
	rungUndecided(vs[4:5], conc, "was", conc.CutReason())
	peak := PeakRun(l)
	rungUndecided(vs[2:3], peak, "behind it was", peak.TransientReason())
	return vs
}

// rungUndecided makes the verdicts on rung r's figures, but a disabled one's, inconclusive for why
// (a ramp never steady, a rung cut by load.max_rung_duration); how is "was" or "behind it was".
func rungUndecided(vs []results.Verdict, r *results.Run, how, why string) {
	for i := range vs {
		if why == "" || vs[i].Result == ResultDisabled {
			continue
		}
		if vs[i].Result != ResultInconclusive {
			vs[i].Reason += ": but inconclusive"
		}
		vs[i].Result = ResultInconclusive
		vs[i].Reason += "; the " + r.Kind + " rung " + how + " " + why
	}
}

// undecided reports whether any gate of the endpoint could not decide.
func undecided(ep *results.Endpoint) bool {
	return slices.ContainsFunc(ep.Verdicts, func(v results.Verdict) bool { return v.Result == ResultInconclusive })
}

// comparisonsUndecided reports whether a GPU-to-GPU comparison could not decide (low confidence,
// or a card that looked worse but whose figure cannot show it).
func comparisonsUndecided(cs []results.Compare) bool {
	return slices.ContainsFunc(cs, func(c results.Compare) bool {
		return c.LowConfidence || slices.ContainsFunc(c.Values, func(cell results.CompareCell) bool { return cell.Inconclusive })
	})
}

// percentile reads one percentile of a distribution; tail is the share of samples beyond it, which
// the CPU-wait rule weighs against the engine's wait (compare.Figure.Tail).
type percentile struct {
	of   func(results.Dist) float64
	tail float64
}

var (
	p50 = percentile{func(d results.Dist) float64 { return d.P50 }, 0}
	p95 = percentile{func(d results.Dist) float64 { return d.P95 }, 0.05}
	p99 = percentile{func(d results.Dist) float64 { return d.P99 }, 0.01}
)

// acrossRuns is f, metric's figure of load l, with the interval that covers a rerun (Run.AcrossRuns):
// for history, and for GPUs loaded one after another, whose drift between blocks is not shared. A
// figure not measured in blocks (the ladder's throughputs), read at one moment of an engine whose
// speed the blocks saw move, has its interval widened by that speed's half-width (engineDriftPct).
func acrossRuns(l *results.Load, metric string, f compare.Figure) compare.Figure {
	r := FindRun(l, RunSynchronous)
	if r == nil {
		return f
	}
	d := engineDriftPct(r)
	if ci := r.Repeat.Interval(metric); ci != nil {
		if f.CI == nil || ci.Lo < f.CI.Lo || ci.Hi > f.CI.Hi {
			f.DriftPct = d // the blocks' spread widened it
		}
		f.CI = ci
		return f
	}
	if d > 0 && f.CI != nil && f.Value > 0 {
		f.CI = &results.Interval{Lo: min(f.CI.Lo, f.Value*(1-d/100)), Hi: max(f.CI.Hi, f.Value*(1+d/100)), Level: f.CI.Level}
		f.DriftPct = d
	}
	return f
}

// engineDriftPct is how far (± % of its centre) one moment's reading of the engine's speed may sit
// from its speed over the run: the synchronous blocks' interval of output tok/s is the mean's,
// t × sd/√B; one moment's reading (a ladder rung's) carries a block's, √B times that (0: no blocks).
func engineDriftPct(sync *results.Run) float64 {
	ci := sync.Repeat.Interval(speedFigure)
	if ci == nil || !(ci.Hi+ci.Lo > 0) {
		return 0
	}
	return (ci.Hi - ci.Lo) / (ci.Hi + ci.Lo) * 100 * math.Sqrt(float64(sync.Repeat.Blocks))
}

// speedFigure is the synchronous rung's figure that stands for the engine's speed.
const speedFigure = "output_tok_s"

// requests is the number of requests behind a figure of run r: its successful requests, or the
// distribution's own count when smaller (an ITL p95 of 5 requests is 5 samples, however many gaps).
func requests(r *results.Run, d results.Dist) int {
	if d.Count > 0 {
		return min(d.Count, r.Requests.Successful)
	}
	return r.Requests.Successful
}

// distMeasure reads a percentile of a run's distribution; a run without samples is not measured.
// Client-limited is the run's own (its requests' lag, the client's CPU and socket backlog over its
// window): a later rung that overloaded the client leaves an earlier rung's latencies decided.
func distMeasure(r *results.Run, kind string, get func(*results.Run) (results.Dist, *results.Interval), pick percentile, lb bool, l *results.Load) Measured {
	if r == nil {
		return Measured{Missing: fmt.Sprintf("the load profile %q has no %s run", l.Config.Profile, kind)}
	}
	d, ci := get(r)
	if d.Count == 0 {
		return Measured{Missing: fmt.Sprintf("the %s run has no samples (%d successful requests)", kind, r.Requests.Successful)}
	}
	return Measured{Present: true, Figure: withCPU(compare.Figure{Value: pick.of(d), LowerBound: lb, ClientLimited: r.ClientLimited, Samples: requests(r, d), CI: ci, Window: r.WindowSeconds, Tail: pick.tail}, r)}
}

// withCPU is f with its rung's CPU wait: its engine's own, else its host's CPU pressure (a pod).
func withCPU(f compare.Figure, r *results.Run) compare.Figure {
	f.CPUWait = r.EngineCPUWaitPct
	if f.CPUWait == nil && r.HostCPUPressurePct != nil {
		f.CPUWait, f.HostPressure = r.HostCPUPressurePct, true
	}
	return f
}

func sustainedMeasure(l *results.Load) Measured {
	f, ok := sustainedFigure(l)
	if !ok {
		return Measured{Missing: fmt.Sprintf("the load profile %q measured no sustained throughput", l.Config.Profile)}
	}
	return Measured{Present: true, Figure: acrossRuns(l, MetricSustainedReqS, f)} // a gate covers a rerun
}

func concThroughput(r *results.Run, l *results.Load) Measured {
	if r == nil {
		return Measured{Missing: fmt.Sprintf("the load profile %q has no concurrency run", l.Config.Profile)}
	}
	if r.Requests.Successful == 0 {
		return Measured{Missing: "the concurrency run completed no request"}
	}
	return Measured{Present: true, Figure: withCPU(compare.Figure{Value: r.OutputTokS, ClientLimited: r.ClientLimited, Samples: r.Requests.Successful, CI: r.CI.Get("output_tok_s"), Window: r.WindowSeconds}, r)}
}

// PeakRun is the rung with the best output tok/s, behind the peak and sustained figures (nil
// without rungs); the one home of that rule (a fleet's baseline digest keeps this rung).
func PeakRun(l *results.Load) *results.Run {
	var best *results.Run
	for i := range l.Runs {
		if r := &l.Runs[i]; best == nil || r.OutputTokS > best.OutputTokS {
			best = r
		}
	}
	return best
}

// throughputFigure is a load-wide throughput figure with its rung's requests, CI (scaled to the
// figure's units, as sustained req/s is), client limit and whether it is a lower bound.
func throughputFigure(l *results.Load, v float64) compare.Figure {
	f := compare.Figure{Value: v, LowerBound: l.Saturation.LowerBound(), ClientLimited: l.Client.ClientLimited, ReqS: l.SustainedReqS}
	if r := PeakRun(l); r != nil {
		// A rung that never levelled read its ramp, below its steady rate: a lower bound.
		f.LowerBound = f.LowerBound || r.TransientReason() != ""
		// Throughput counts every token streamed in the window: the requests behind it are those
		// that streamed, complete or not (older summaries have only the successful count).
		f.Samples = max(r.Requests.Successful, r.Requests.Streamed)
		f.Window = r.WindowSeconds
		f.ClientLimited = f.ClientLimited || r.ClientLimited
		f = withCPU(f, r)
		if ci := r.CI.Get("output_tok_s"); ci != nil && r.OutputTokS > 0 {
			k := v / r.OutputTokS
			f.CI = &results.Interval{Lo: ci.Lo * k, Hi: ci.Hi * k, Level: ci.Level}
		}
	}
	return f
}

// peakFigure is the load's peak output tok/s, else its best rung's.
func peakFigure(l *results.Load) (compare.Figure, bool) {
	v := l.PeakOutputTokS
	if r := PeakRun(l); v <= 0 && r != nil {
		v = r.OutputTokS
	}
	return throughputFigure(l, v), v > 0
}

func sustainedFigure(l *results.Load) (compare.Figure, bool) {
	if l.SustainedReqS <= 0 {
		return compare.Figure{}, false
	}
	return throughputFigure(l, l.SustainedReqS), true
}

// LLMMetric is one per-endpoint figure compared GPU to GPU and against baselines.
type LLMMetric struct {
	Name           string
	HigherIsBetter bool
	// BaselineOnly: compared against baselines but not GPU to GPU (too noisy between cards).
	BaselineOnly bool
	// Get reads the figure with its quality (the requests behind it, CI, client-limited, lower
	// bound) from a load; ok is false when it was not measured.
	Get func(l *results.Load) (f compare.Figure, ok bool)
}

// LLMMetrics are the LLM figures compared GPU to GPU, node to node and against baselines.
var LLMMetrics = []LLMMetric{
	{MetricSustainedReqS, true, false, sustainedFigure},
	{MetricPeakOutputTokS, true, false, peakFigure},
	{MetricTTFTP95, false, false, runDist(RunSynchronous, p95, func(r *results.Run) (results.Dist, *results.Interval) { return r.TTFT, r.CI.Get(MetricTTFTP95) })},
	{MetricITLP95, false, false, runDist(RunSynchronous, p95, func(r *results.Run) (results.Dist, *results.Interval) { return r.ITL, r.CI.Get(MetricITLP95) })},
	{MetricTPOTP95, false, false, runDist(RunSynchronous, p95, func(r *results.Run) (results.Dist, *results.Interval) { return r.TPOT, r.CI.Get(MetricTPOTP95) })},
	// The sync run's median TPOT, the card's decode step at concurrency 1, has the tightest interval
	// of its speed: the figure that resolves a slowdown near the margin.
	{MetricTPOTP50, false, false, runDist(RunSynchronous, p50, func(r *results.Run) (results.Dist, *results.Interval) { return r.TPOT, r.CI.Get(MetricTPOTP50) })},
	{MetricConcOutputTokS, true, false, func(l *results.Load) (compare.Figure, bool) {
		m := concThroughput(FindRun(l, RunConcurrency), l)
		m.ReqS = l.SustainedReqS
		return m.Figure, m.Present
	}},
	{MetricConcTTFTP99, false, true, runDist(RunConcurrency, p99, concTTFT)},
}

// concTTFT is the concurrency run's TTFT with the interval of its p99.
func concTTFT(r *results.Run) (results.Dist, *results.Interval) {
	return r.TTFT, r.CI.Get(MetricTTFTP99)
}

// runDist reads a percentile of a distribution of the load's run of the kind.
func runDist(kind string, pick percentile, get func(*results.Run) (results.Dist, *results.Interval)) func(*results.Load) (compare.Figure, bool) {
	return func(l *results.Load) (compare.Figure, bool) {
		m := distMeasure(FindRun(l, kind), kind, get, pick, false, l)
		return m.Figure, m.Present
	}
}

// ModelComparisons compares every LLM metric across the endpoints of one model on one host, leaving
// out failed endpoints and those without load. With sharedClient (GPUs loaded at once by one gpuvet),
// a client that fell behind on any rung of any of them was short of CPU for all: every comparison is
// then client-limited (sparing the sync rung left 14 of 24 starved cells decided).
func ModelComparisons(m *results.Model, g Guards, sharedClient bool) []results.Compare {
	var gpus []int
	var loads []*results.Load
	limited := false
	for i := range m.Endpoints {
		e := &m.Endpoints[i]
		// Only the endpoint's own error excludes it, not a status an earlier Apply set (idempotence);
		// a failed API suite does not void the load.
		if e.Load == nil || len(e.Load.Runs) == 0 || e.Error != "" || SharedGPU(e) || EngineFaulted(e) {
			continue
		}
		gpus, loads = append(gpus, endpointGPU(e, i)), append(loads, e.Load)
		limited = limited || (sharedClient && loadClientLimited(e.Load))
	}
	if len(loads) < 2 {
		return nil
	}
	var out []results.Compare
	for _, met := range LLMMetrics {
		if met.BaselineOnly {
			continue
		}
		var cells []compare.Cell
		blocks := alignedBlocks(loads, met.Name, sharedClient)
		for i, l := range loads {
			f, ok := met.Get(l)
			if !ok {
				continue
			}
			if !sharedClient { // not side by side: each GPU's drift between blocks is its own
				f = acrossRuns(l, met.Name, f)
			}
			if blocks != nil {
				f.Blocks = blocks[i]
			}
			f.ReqS = l.SustainedReqS
			f.ClientLimited = f.ClientLimited || limited
			cells = append(cells, compare.Cell{GPU: gpus[i], Figure: f})
		}
		if len(cells) < 2 {
			continue
		}
		c := compare.Peers(met.Name, cells, met.HigherIsBetter, g)
		if limited {
			c.ClientLimited = true
			c.Note = strings.TrimPrefix(c.Note+"; "+SharedClientLimited, "; ")
		}
		out = append(out, c)
	}
	return out
}

// SharedClientLimited is what a model's GPU-to-GPU comparisons say when the load generator that
// loaded its GPUs at once fell behind.
const SharedClientLimited = "not decided: the GPUs were loaded at once and the load generator fell behind (client-limited) on a rung of at least one, so it, not the servers, set some of their figures: give gpuvet more CPU, or load fewer GPUs at once (--parallel-gpus 1), and rerun"

// loadClientLimited says whether the client fell behind on any rung of load l.
func loadClientLimited(l *results.Load) bool {
	return l.Client.ClientLimited || slices.ContainsFunc(l.Runs, func(r results.Run) bool { return r.ClientLimited })
}

// rollHost rolls a host's status up from its discovery, health and models.
func rollHost(h *results.Host) {
	st := results.StatusSkipped
	if h.Health != nil {
		hs := h.Health.Status
		if h.Health.Error != "" && h.Health.Disruption == "" {
			hs = results.StatusFailed
		}
		if len(h.Health.Flags) > 0 {
			hs = results.Worse(hs, results.StatusFlag)
		}
		for _, g := range h.Health.GPUs {
			hs = results.Worse(hs, g.Status)
			if len(g.Flags) > 0 {
				hs = results.Worse(hs, results.StatusFlag)
			}
		}
		for _, c := range h.Health.Comparisons {
			for _, cell := range c.Values {
				if cell.Flagged {
					hs = results.Worse(hs, results.StatusFlag)
				}
			}
		}
		st = results.Worse(st, hs)
	}
	for _, m := range h.Models {
		st = results.Worse(st, m.Status)
	}
	for _, g := range h.GPUs {
		st = results.Worse(st, g.Status)
	}
	if len(h.Flags) > 0 {
		st = results.Worse(st, results.StatusFlag)
	}
	switch {
	case h.Error != "" && h.Disruption != "" && h.Discovery.Error == "":
		st = results.Worse(st, results.StatusInconclusive) // not the hardware's: what it measured stands
	case h.Error != "" || h.Discovery.Error != "":
		st = results.StatusFailed
	}
	h.Status = st
}

// rollRun rolls the run up from its hosts and baseline, and gathers every flag into s.Flags.
func rollRun(s *results.Summary) {
	st := results.StatusSkipped
	var all []results.Flag
	for _, h := range s.Hosts {
		st = results.Worse(st, h.Status)
		all = append(all, h.AllFlags()...)
	}
	if b := s.Baseline; b != nil && len(BaselineFlags(b)) > 0 {
		all = append(all, BaselineFlags(b)...)
		st = results.Worse(st, results.StatusFlag)
	}
	if s.Error != "" {
		st = results.StatusFailed
	}
	if len(s.Hosts) == 0 && s.Error == "" {
		st = results.StatusFailed
		s.Error = "no hosts in the summary: nothing was measured"
	}
	s.Flags = all
	s.Status = st
}

// ExitCode is the process exit code for a judged summary: 1 on a failure, a run that did not finish,
// a flag with failOnFlag or an inconclusive run with failOnInconclusive; 0 otherwise.
func ExitCode(s *results.Summary, failOnFlag, failOnInconclusive bool) int {
	if s == nil || !s.Complete {
		return 1
	}
	switch s.Status {
	case results.StatusFailed, results.StatusInterrupted, results.StatusIncomplete:
		return 1
	case results.StatusFlag:
		if failOnFlag {
			return 1
		}
	case results.StatusInconclusive:
		if failOnInconclusive {
			return 1
		}
	}
	return 0
}
