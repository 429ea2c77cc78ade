package judge

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Baseline row statuses.
const (
	BaselineOK            = "ok"
	BaselineBreach        = "breach"
	BaselineLowConfidence = "low_confidence"
	BaselineLowerBound    = "lower_bound"
	BaselineMissing       = "missing"
)

// figure is one subject × metric of one summary, with what the guards need.
type figure = compare.Figure

// subjectFigures is every comparable figure of a summary: subject -> metric -> figure, plus the
// subjects in the order they appear.
type subjectFigures struct {
	order   []string
	metrics map[string][]string // subject -> metrics in order
	higher  map[string]bool     // metric -> higher is better
	fig     map[string]map[string]figure
	dups    []string
}

func (sf *subjectFigures) add(subject, metric string, higher bool, x figure) {
	if sf.fig[subject] == nil {
		sf.fig[subject] = map[string]figure{}
		sf.order = append(sf.order, subject)
	}
	if _, dup := sf.fig[subject][metric]; dup {
		sf.dups = append(sf.dups, subject+" "+metric)
		return
	}
	sf.fig[subject][metric] = x
	sf.metrics[subject] = append(sf.metrics[subject], metric)
	sf.higher[metric] = higher
}

// collect reads the comparable figures of a summary: LLM metrics per model × GPU index, microbenchmarks
// per GPU index; with byHost each subject starts with its host's name ("node1: ") so fleets line up.
func collect(s *results.Summary, byHost bool) *subjectFigures {
	sf := &subjectFigures{metrics: map[string][]string{}, higher: map[string]bool{}, fig: map[string]map[string]figure{}}
	for _, h := range s.Hosts {
		prefix := ""
		if byHost {
			prefix = h.Name + ": "
		}
		for _, m := range h.Models {
			for i := range m.Endpoints {
				ep := &m.Endpoints[i]
				// A shared GPU's figures are not its own: no baseline comparison either way (issue 26).
				if ep.Load == nil || len(ep.Load.Runs) == 0 || SharedGPU(ep) || EngineFaulted(ep) {
					continue
				}
				subj := fmt.Sprintf("%s%s gpu %d", prefix, m.Model, endpointGPU(ep, i))
				for _, met := range LLMMetrics {
					f, ok := met.Get(ep.Load)
					if !ok {
						continue
					}
					f = acrossRuns(ep.Load, met.Name, f) // the baseline is another run
					f.ReqS = ep.Load.SustainedReqS
					sf.add(subj, met.Name, met.HigherIsBetter, f)
				}
			}
		}
		if h.Health == nil {
			continue
		}
		for _, g := range h.Health.GPUs {
			for _, b := range g.Bench {
				if b.Status == results.StatusFailed || b.Error != "" || b.Value <= 0 || b.Busy {
					continue
				}
				sf.add(fmt.Sprintf("%sgpu %d", prefix, g.GPU.Index), b.Name, true, figure{Value: b.Value})
			}
		}
	}
	return sf
}

// CompareBaseline lines environments up against a baseline (bare metal): per subject (an endpoint by
// model + GPU index, a microbenchmark by GPU index) and metric, the overhead % (positive = worse) and
// a status per environment by tolerancePct and the noise guards g. Caveats say what else differs or
// is a lower bound; a nil baseline gives only a note.
func CompareBaseline(base *results.Summary, envs []*results.Summary, tolerancePct float64, g Guards) *results.BaselineComparison {
	bc := &results.BaselineComparison{TolerancePct: tolerancePct}
	if base == nil {
		bc.Note = "no comparison: no baseline"
		return bc
	}
	names := envNames(envs)
	bc.Environments = names
	// Fleets (more than one host on any side) are matched host by host; single hosts by GPU only,
	// so a bare-metal run and a VM of the same machine compare whatever their host names.
	byHost := len(base.Hosts) > 1
	for _, e := range envs {
		byHost = byHost || len(e.Hosts) > 1
	}
	bf := collect(base, byHost)
	efs := make([]*subjectFigures, len(envs))
	for i, e := range envs {
		efs[i] = collect(e, byHost)
		bc.Caveats = append(bc.Caveats, caveats(base, e, names[i])...)
		bc.Caveats = append(bc.Caveats, dupCaveats(names[i], efs[i])...)
	}
	bc.Caveats = append(bc.Caveats, dupCaveats("baseline", bf)...)
	bc.Caveats = append(bc.Caveats, lowerBoundCaveats("baseline", base)...)
	for i, e := range envs {
		bc.Caveats = append(bc.Caveats, lowerBoundCaveats(names[i], e)...)
	}
	for _, subj := range bf.order {
		for _, met := range bf.metrics[subj] {
			bc.Rows = append(bc.Rows, overheadRow(bc, subj, met, bf, efs, names, tolerancePct, g))
		}
	}
	if len(bc.Rows) == 0 {
		bc.Note = "no comparison: the baseline has no figure to compare (no endpoint with load, no microbenchmark)"
		return bc
	}
	for i, ef := range efs {
		if !sharesSubject(bf, ef) {
			bc.Caveats = append(bc.Caveats, fmt.Sprintf("%s: no subject in common with the baseline (baseline %s; %s %s): compare the same models on the same GPU indexes (and, for fleets, the same host names)",
				names[i], strings.Join(first(bf.order, 3), ", "), names[i], strings.Join(first(ef.order, 3), ", ")))
		}
	}
	return bc
}

// dupCaveats says which subjects a side has on more than one host: only the first is compared.
func dupCaveats(side string, sf *subjectFigures) []string {
	var out []string
	for _, d := range sf.dups {
		out = append(out, fmt.Sprintf("%s: %s appears on more than one host; the first is compared", side, d))
	}
	return out
}

// overheadRow lines one subject's metric up across the environments; an environment without it is
// missing, not worse.
func overheadRow(bc *results.BaselineComparison, subj, met string, bf *subjectFigures, efs []*subjectFigures, names []string,
	tolerancePct float64, g Guards) results.OverheadRow {
	bx := bf.fig[subj][met]
	row := results.OverheadRow{Subject: subj, Metric: met, HigherIsBetter: bf.higher[met], Baseline: bx.Value,
		Values: map[string]float64{}, OverheadPct: map[string]float64{}, Status: map[string]string{}}
	for i, ef := range efs {
		ex, ok := ef.fig[subj][met]
		if !ok {
			row.Status[names[i]] = BaselineMissing
			continue
		}
		row.Values[names[i]] = ex.Value
		row.OverheadPct[names[i]] = round2(compare.DeltaPct(ex.Value, bx.Value, row.HigherIsBetter))
		st, note, sd := overheadStatus(met, bx, ex, row.HigherIsBetter, tolerancePct, g)
		row.Status[names[i]] = st
		if sd.CI != nil {
			addDetectable(bc, &row, names[i], met, sd)
		}
		if note != "" {
			if row.Notes == nil {
				row.Notes = map[string]string{}
			}
			row.Notes[names[i]] = note
		}
	}
	return row
}

// addDetectable keeps an overhead's interval and the smallest overhead it could have detected, on
// the row and, the largest per metric, for the environment.
func addDetectable(bc *results.BaselineComparison, row *results.OverheadRow, env, met string, sd compare.Slowdown) {
	if row.OverheadCI == nil {
		row.OverheadCI, row.DetectablePct = map[string]*results.Interval{}, map[string]float64{}
	}
	row.OverheadCI[env] = &results.Interval{Lo: round2(sd.CI.Lo), Hi: round2(sd.CI.Hi), Level: sd.CI.Level}
	d := math.Round(sd.DetectablePct*10) / 10
	row.DetectablePct[env] = d
	if bc.DetectablePct == nil {
		bc.DetectablePct = map[string]map[string]float64{}
	}
	if bc.DetectablePct[env] == nil {
		bc.DetectablePct[env] = map[string]float64{}
	}
	bc.DetectablePct[env][met] = max(bc.DetectablePct[env][met], d)
}

func sharesSubject(a, b *subjectFigures) bool {
	return slices.ContainsFunc(a.order, func(subj string) bool { return b.fig[subj] != nil })
}

// first returns up to n items, with "…" when there were more.
func first(list []string, n int) []string {
	if len(list) <= n {
		return list
	}
	return append(append([]string(nil), list[:n]...), "…")
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// overheadStatus decides one environment's figure against the baseline's by compare.Slower with the
// tolerance as margin: a breach is an overhead beyond it whose interval lies beyond it too.
func overheadStatus(metric string, base, env figure, higher bool, tolPct float64, g Guards) (string, string, compare.Slowdown) {
	s := compare.Slower(metric, env, base, higher, tolPct, g)
	res, over, why := s.Result, s.Pct, s.Why
	thr := compare.IsThroughputMetric(metric) && higher
	switch {
	case res == compare.Pass && thr && base.LowerBound && why == "":
		return BaselineLowerBound, "the baseline's sweep was truncated or unsaturated: its throughput is a lower bound, the real overhead may be larger", s
	case res == compare.Pass && why != "" && compare.IsTTFTMetric(metric):
		return BaselineOK, fmt.Sprintf("%.1f %% worse but %s", over, why), s
	case res == compare.Pass && why != "":
		return BaselineLowConfidence, why, s
	case res == compare.Pass:
		return BaselineOK, "", s
	case res == compare.Inconclusive && thr && env.LowerBound && !compare.TooFew(env, g.MinSamples) && !env.ClientLimited:
		return BaselineLowerBound, "this environment's sweep was truncated or unsaturated: its throughput is a lower bound, the gap is not a measurement", s
	case res == compare.Inconclusive:
		return BaselineLowConfidence, why, s
	}
	return BaselineBreach, "", s
}

// envNames names the environment columns by each summary's Environment, made unique.
func envNames(envs []*results.Summary) []string {
	seen := map[string]int{}
	out := make([]string, len(envs))
	for i, e := range envs {
		n := cmp.Or(e.Environment, fmt.Sprintf("env%d", i+1))
		seen[n]++
		if seen[n] > 1 {
			n = fmt.Sprintf("%s (%d)", n, seen[n])
		}
		out[i] = n
	}
	return out
}

// caveats says what differs between the baseline and one environment beyond the hardware.
func caveats(base, env *results.Summary, name string) []string {
	var out []string
	diff := func(what, a, b string) {
		if a != "" && b != "" && a != b {
			out = append(out, fmt.Sprintf("%s: %s differs (baseline %s, %s %s)", name, what, a, name, b))
		}
	}
	diff("driver version", driverOf(base), driverOf(env))
	diff("CUDA version", base.Meta.CUDAVersion, env.Meta.CUDAVersion)
	diff("engine", base.Meta.Engine, env.Meta.Engine)
	diff("engine version", base.Meta.EngineVersion, env.Meta.EngineVersion)
	if a, b := gpuCount(base), gpuCount(env); a != b {
		out = append(out, fmt.Sprintf("%s: GPU count differs (baseline %d, %s %d)", name, a, name, b))
	}
	if d := profileDiff(base.Meta.LoadProfile, env.Meta.LoadProfile); d != "" {
		out = append(out, fmt.Sprintf("%s: load profile differs (%s): the LLM figures measure different loads; re-record the baseline with the same profile", name, d))
	}
	return out
}

func driverOf(s *results.Summary) string {
	if s.Meta.DriverVersion != "" {
		return s.Meta.DriverVersion
	}
	for _, h := range s.Hosts {
		for _, g := range h.Discovery.GPUs {
			if g.DriverVersion != "" {
				return g.DriverVersion
			}
		}
	}
	return ""
}

func gpuCount(s *results.Summary) int {
	n := 0
	for _, h := range s.Hosts {
		if len(h.Discovery.GPUs) > 0 {
			n += len(h.Discovery.GPUs)
		} else if h.Health != nil {
			n += len(h.Health.GPUs)
		}
	}
	return n
}

// profileDiff names the load-profile fields that differ ("" when equal or unknown on both sides).
func profileDiff(a, b *results.LoadConfig) string {
	switch {
	case a == nil && b == nil:
		return ""
	case a == nil || b == nil:
		return "recorded on one side only"
	}
	var d []string
	add := func(field string, x, y any) {
		if x != y {
			d = append(d, fmt.Sprintf("%s %v vs %v", field, x, y))
		}
	}
	add("profile", a.Profile, b.Profile)
	add("api", a.API, b.API)
	add("prompt_tokens", a.PromptTokens, b.PromptTokens)
	add("prompt_tokens_stdev", a.PromptStdev, b.PromptStdev)
	add("output_tokens", a.OutputTokens, b.OutputTokens)
	add("max_concurrency", a.MaxConcurrency, b.MaxConcurrency)
	add("concurrency", a.Concurrency, b.Concurrency)
	add("rate", a.Rate, b.Rate)
	add("rates", a.Rates, b.Rates)
	add("max_duration", time.Duration(a.MaxDuration), time.Duration(b.MaxDuration))
	add("max_requests", a.MaxRequests, b.MaxRequests)
	add("warmup", a.Warmup, b.Warmup)
	add("data", a.Data, b.Data)
	if len(d) == 0 {
		return ""
	}
	return strings.Join(d, ", ")
}

// lowerBoundCaveats names each endpoint whose sweep is only a lower bound.
func lowerBoundCaveats(name string, s *results.Summary) []string {
	var out []string
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for i := range m.Endpoints {
				ep := &m.Endpoints[i]
				if ep.Load != nil && ep.Load.Saturation.LowerBound() {
					why := cmp.Or(ep.Load.Saturation.Reason, "truncated or unsaturated")
					out = append(out, fmt.Sprintf("%s: %s gpu %d sweep is a lower bound (%s): throughput gaps against it are not flagged", name, m.Model, endpointGPU(ep, i), why))
				}
			}
		}
	}
	return out
}

// BaselineFlags turns every breach of a baseline comparison into a run-level flag.
func BaselineFlags(b *results.BaselineComparison) []results.Flag {
	var out []results.Flag
	for _, r := range b.Rows {
		for _, env := range b.Environments {
			if r.Status[env] != BaselineBreach {
				continue
			}
			dir := map[bool]string{true: "lower", false: "higher"}[r.HigherIsBetter]
			out = append(out, results.Flag{Scope: "run", Subject: fmt.Sprintf("%s [%s]", r.Subject, env), Check: CheckBaseline,
				Reason: fmt.Sprintf("%s %s vs baseline %s: %.1f %% worse (%s), beyond the %g %% tolerance; check the %s environment's GPU passthrough, NUMA pinning and CPU/memory sizing",
					r.Metric, fmtNum(r.Values[env]), fmtNum(r.Baseline), r.OverheadPct[env], dir, b.TolerancePct, env)})
		}
	}
	return out
}
