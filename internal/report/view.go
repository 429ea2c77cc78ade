package report

import (
	"fmt"
	"html/template"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/fleetview"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The view is the summary arranged for reading: everything the template prints is computed here, so
// the template holds layout only and this file holds the choices (what is a KPI, what opens by default).

type kv struct{ K, V string }

type kpi struct{ Label, Value, Note string }

type flagView struct {
	Scope, Subject, Check, Reason string
	// On is the GPU (or GPUs) the flag is about, "gpu 2" (after its host's name on a many-host
	// run), "" for one about no GPU: the headline counts flags by it, so that a GPU's health and
	// serving flags read as one GPU's.
	On string
}

type page struct {
	Title, RunID, Generated, Headline string
	Status                            string     // ok, flag, failed, skipped
	StatusWord                        string     // PASS, WARN, FAIL, SKIPPED
	Flags                             []flagView // the first maxVerdictFlags, shown open
	MoreFlags                         []flagView // the rest, folded
	FlagCount                         int
	Actions, Errors, Caveats          []string
	MoreErrors                        []string // the errors beyond maxVerdictFlags, folded
	Incomplete                        bool
	Platform, Settings                []kv
	KPIs                              []kpi
	Hosts                             []hostView
	Baseline                          *baselineView
	History                           *historyView  // each node against its own acceptance run, and its trend (issue 47)
	Fleet                             *fleetView    // multi-host runs: skipped nodes and node-to-node comparisons
	FleetMap                          *fleetMapView // multi-host runs: the node × GPU heat map and the nodes ranked worst first
	Thresholds                        []thresholdView
	TimeToVet                         []kv // issue 34: wall time per phase and per GPU
	Large                             bool // many sections: collapse what is fine
	Overview                          []overviewRow
	// The judge's findings by layer (results.Summary.Findings), worst first; the run's layers in a
	// line ("engine failed, gpu ok") and the action its hardware findings ask for, in words.
	Findings       []findingView
	LayerLine      string
	HardwareAction string
}

// findingView is one finding as the report's Findings table shows it.
type findingView struct {
	Layer, Status, Action, ActionWords, Host, Subject, Check, Reason string
}

// buildFindings are the run's findings, failed first, then flag, then inconclusive.
func buildFindings(s *results.Summary) []findingView {
	var out []findingView
	for _, f := range worstFirst(s.Findings) {
		v := findingView{Layer: f.Layer, Status: string(f.Status), Action: f.Action, ActionWords: orDash(results.ActionWords[f.Action]),
			Subject: f.Subject, Check: f.Check, Reason: f.Reason}
		if len(s.Hosts) > 1 && f.Host != "" && !strings.Contains(f.Subject, f.Host) {
			v.Host = f.Host
		}
		out = append(out, v)
	}
	return out
}

// overviewRow is one model on one host, for the overview of a large run.
type overviewRow struct {
	Anchor, Host, Model, Status, Endpoints, Peak, TTFT string
	Flags                                              int
}

type thresholdView struct{ Name, Value, Source string }

// fleetView is a multi-host run's own section.
type fleetView struct {
	Skipped []kv
	Compare *compareTable
}

// buildFleet is the node-to-node section; in a large fleet its table has a column for each host
// rendered in full (shown, the worst first), and says how many more summary.json holds.
func buildFleet(s *results.Summary, shown []results.Host) *fleetView {
	f := s.Fleet
	if f == nil || (len(f.Skipped) == 0 && len(f.Comparisons) == 0) {
		return nil
	}
	cs := f.Comparisons
	if len(shown) < len(s.Hosts) {
		keep := map[string]bool{}
		for _, h := range shown {
			keep[h.Name] = true
		}
		cs = make([]results.Compare, len(f.Comparisons))
		for i, c := range f.Comparisons {
			c.Values = slices.DeleteFunc(slices.Clone(c.Values), func(v results.CompareCell) bool { return !keep[v.Host] })
			c.Note = strings.TrimPrefix(c.Note+fmt.Sprintf("; %d more nodes in summary.json (the fleet section ranks them all)", len(f.Comparisons[i].Values)-len(c.Values)), "; ")
			cs[i] = c
		}
	}
	v := &fleetView{Compare: compares(cs)}
	for _, sk := range f.Skipped {
		v.Skipped = append(v.Skipped, kv{sk.Name, sk.Reason})
	}
	return v
}

type hostView struct {
	Name, Status, Error, Discovery string
	Flags                          int
	VMs                            []string // one line per VM gpuvet created on the host (backend opennebula)
	Prep                           []kv     // what host preparation used, installed, removed, released and restored
	PrepBad                        bool     // host preparation left something behind or could not restore vfio
	Health                         *healthView
	Models                         []modelView
	GPUs                           []gpuPill // each GPU's judged verdict (results.Host.GPUs)
}

// gpuPill is a GPU's verdict; Action, in words, what its own findings ask for ("" for none).
type gpuPill struct{ GPU, Status, Class, Tip, Action string }

type healthView struct {
	Source, Status, Error, DCGM string
	Open                        bool
	Notes                       []string
	Inventory                   []invRow
	BenchHeads                  []kv // name -> unit
	Bench                       []benchRow
	Compare                     *compareTable
	Burn                        template.HTML
	Links                       *linksView // GPU interconnect (nil: not read)
}

type invRow struct {
	GPU, Name, UUID, Bus, NUMA, Memory, PCIe, ECC, Clocks, Events, Temp, Power, Status string
	PCIeBad, ECCBad, EventsBad                                                         bool
}

type cell struct{ Text, Class, Tip string }

type benchRow struct {
	GPU, Status string
	Cells       []cell
	Burn, DCGM  cell
}

type modelView struct {
	Anchor, Model, Engine, Status, Error string
	Open                                 bool
	Flags                                int
	GateHeads                            []kv // check id -> column title
	Rows                                 []epRow
	Throughput, TTFT, Power              template.HTML
	Telemetry                            []template.HTML // one chart per GPU: clocks, power, temperature under the load
	Workload                             []template.HTML // the workload's own charts (view_workload.go)
	Functional                           *funcTable
	Compare                              *compareTable
	Notes                                []string
}

type epRow struct {
	GPU, Status, Sustained, Peak, TTFT, ITL, TPOT, TokPerJ, PowerW, Error string
	StatusTip                                                             string // the serving verdict, when the GPU's differs
	SOL, SOLTip                                                           string // % of speed-of-light, and how it was bounded
	LogTail, LogFile                                                      string // shown with the error
	Gates                                                                 []cell
	LowerBound                                                            bool
}

type funcTable struct {
	Cols  []string
	Rows  []funcRow
	Fails []kv // subject -> detail
}

type funcRow struct {
	Name  string
	Cells []cell
}

type compareTable struct {
	Cols []string // GPU labels
	Rows []compareRow
}

type compareRow struct {
	Metric, Rule, Best, Note string
	Cells                    []cell
}

type baselineView struct {
	File, Note, Summary string
	Envs, Caveats       []string
	Rows                []baseRow
	Chart               template.HTML
}

type baseRow struct {
	Subject, Metric, Baseline string
	Cells                     []cell // per environment: value and overhead
}

var statusWord = map[results.Status]string{results.StatusOK: "PASS", results.StatusFlag: "WARN", results.StatusFailed: "FAIL", results.StatusSkipped: "SKIPPED",
	results.StatusInconclusive: "UNDECIDED",
	results.StatusInterrupted:  "INTERRUPTED", results.StatusIncomplete: "INCOMPLETE", results.StatusNotRun: "NOT RUN"}

// maxVerdictFlags is how many flags the verdict lists before folding the rest.
const maxVerdictFlags = 12

func buildPage(s *results.Summary) *page {
	p := &page{Title: "gpuvet report", RunID: s.RunID, Status: string(s.Status), StatusWord: statusWord[s.Status], Incomplete: !s.Complete}
	if p.StatusWord == "" {
		p.Status, p.StatusWord = "skipped", "UNKNOWN"
	}
	if s.Status == results.StatusOK && anySkipped(s) {
		// Some checks did not run: the headline says "that is not a pass", so the badge is no green PASS.
		p.Status, p.StatusWord = "partial", "PARTIAL"
	}
	p.Generated = s.StartedAt.UTC().Format("2006-01-02 15:04 UTC")
	if !s.FinishedAt.IsZero() {
		p.Generated += " – " + s.FinishedAt.UTC().Format("15:04 UTC") + " (" + s.FinishedAt.Sub(s.StartedAt).Round(time.Second).String() + ")"
	}
	p.Flags = allFlags(s)
	p.FlagCount = len(p.Flags)
	if len(p.Flags) > maxVerdictFlags {
		p.Flags, p.MoreFlags = p.Flags[:maxVerdictFlags], p.Flags[maxVerdictFlags:]
	}
	p.Errors = allErrors(s)
	if len(p.Errors) > maxVerdictFlags {
		p.Errors, p.MoreErrors = p.Errors[:maxVerdictFlags], p.Errors[maxVerdictFlags:]
	}
	p.Headline = headline(s, p)
	p.Actions = actions(s, allFlags(s))
	p.Findings = buildFindings(s)
	p.LayerLine = results.LayerLine(s.Layers)
	if s.Action != "" && s.Action != results.ActionNone {
		p.HardwareAction = results.ActionWords[s.Action]
	}
	p.Platform = platform(s)
	p.KPIs = kpis(s)
	// A run is large when its sections would make a wall of tables: then the overview comes first
	// and what is fine folds. One host with one model (any GPU count) stays fully open.
	sections, endpoints := 0, 0
	for _, h := range s.Hosts {
		sections += 1 + len(h.Models)
		for _, m := range h.Models {
			endpoints += len(m.Endpoints)
		}
	}
	p.Large = sections > 3 || endpoints > 12
	shown := s.Hosts
	if isFleet(s) {
		v := fleetview.Ranked(s)
		shown = shownHosts(s, v)
		p.FleetMap = buildFleetMap(s, v, shown)
	}
	if p.Large {
		p.Overview = overview(s, shown)
	}
	for _, h := range shown {
		p.Hosts = append(p.Hosts, buildHost(s, h, p.Large))
	}
	if s.Baseline != nil {
		p.Baseline = buildBaseline(s)
	}
	p.History = buildHistory(s)
	p.Fleet = buildFleet(s, shown)
	p.Caveats = caveats(s, shown)
	p.TimeToVet = timeToVet(s, shown)
	p.Thresholds = thresholds(s)
	for _, k := range sortedKeys(s.Meta.Settings) {
		p.Settings = append(p.Settings, kv{k, s.Meta.Settings[k]})
	}
	return p
}

// hostSubject is a flag's subject in a many-host list, after its host's name; a subject that is the
// host itself (a node-to-node flag's "node gpu-7") is the name alone, said once.
func hostSubject(host, subject string) string {
	switch subject {
	case host, "node " + host, "host " + host:
		return host
	}
	return host + ": " + subject
}

// allFlags gathers every flag of the run once: phases copy a flag up to its host and run, so a flag
// is shown once per host it fired on (hosts may share subjects like "gpu 3"), then the run's own.
func allFlags(s *results.Summary) []flagView {
	var out []flagView
	union := map[results.Flag]bool{}
	multi := len(s.Hosts) > 1
	for _, h := range s.Hosts {
		seen := map[results.Flag]bool{}
		add := func(fs []results.Flag, on string) {
			for _, f := range fs {
				if seen[f] {
					continue
				}
				seen[f], union[f] = true, true
				v := flagView{Scope: f.Scope, Subject: shortUUIDs(f.Subject), Check: f.Check, Reason: f.Reason, On: on}
				if multi {
					v.Subject = hostSubject(h.Name, v.Subject)
					if on != "" {
						v.On = h.Name + " " + on
					}
				}
				out = append(out, v)
			}
		}
		if h.Health != nil {
			for _, g := range h.Health.GPUs {
				add(g.Flags, gpuList([]int{g.GPU.Index}))
			}
			add(h.Health.Flags, "")
		}
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				add(e.Flags, gpuList(e.GPUs))
			}
			add(m.Flags, "")
		}
		add(h.Flags, "")
	}
	for _, f := range s.Flags {
		if !union[f] {
			union[f] = true
			out = append(out, flagView{Scope: f.Scope, Subject: shortUUIDs(f.Subject), Check: f.Check, Reason: f.Reason})
		}
	}
	return out
}

var uuidRe = regexp.MustCompile(`GPU-[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}`)

// shortUUIDs shortens GPU UUIDs in a subject to their first 8 hex digits: the inventory table has them in full.
func shortUUIDs(s string) string {
	return uuidRe.ReplaceAllStringFunc(s, func(u string) string { return u[:12] + "…" })
}

func allErrors(s *results.Summary) []string {
	var out []string
	add := func(where, err string) {
		if err != "" {
			out = append(out, where+": "+err)
		}
	}
	add("run", s.Error)
	for _, h := range s.Hosts {
		add(h.Name, h.Error)
		add(h.Name+" discovery", h.Discovery.Error)
		if h.Health != nil {
			add(h.Name+" health", h.Health.Error)
			if h.Health.DCGM != nil {
				add(h.Name+" DCGM", h.Health.DCGM.Error)
			}
		}
		on := "" // a fleet's errors name their host: gpu 0 is on every host
		if len(s.Hosts) > 1 {
			on = h.Name + ": "
		}
		for _, m := range h.Models {
			add(on+m.Model, m.Error)
			for _, e := range m.Endpoints {
				add(on+m.Model+" on "+gpuList(e.GPUs), e.Error)
				if e.Load != nil {
					add(on+m.Model+" on "+gpuList(e.GPUs)+" load", e.Load.Error)
				}
				if e.Functional != nil {
					add(on+m.Model+" on "+gpuList(e.GPUs)+" functional suite", e.Functional.Error)
				}
			}
		}
	}
	return out
}

func headline(s *results.Summary, p *page) string {
	gpus := 0
	for _, h := range s.Hosts {
		gpus += len(hostGPUs(h))
	}
	what := fmt.Sprintf("%d GPU%s on %d host%s, %d model%s", gpus, plural(gpus), len(s.Hosts), plural(len(s.Hosts)), len(s.Meta.Models), plural(len(s.Meta.Models)))
	switch s.Status {
	case results.StatusOK:
		if anySkipped(s) {
			return "Every check that ran passed: " + what + ". Some were skipped (see the caveats): that is not a pass."
		}
		return "Every check passed: " + what + "."
	case results.StatusInconclusive:
		return "Nothing was flagged, but not every gate could decide: " + what + ". The caveats say which and how to get figures that decide (more samples, a less loaded client): that is not a pass."
	case results.StatusFlag:
		return fmt.Sprintf("%d flag%s raised%s: %s. The hardware serves, but not everything is as it should be.", p.FlagCount, plural(p.FlagCount), flagSubjects(p), what)
	case results.StatusFailed:
		return fmt.Sprintf("The run failed: %s. What was measured is shown below.", what)
	case results.StatusInterrupted:
		return fmt.Sprintf("The run was stopped before it finished: %s. What was measured until then is shown below.", what)
	case results.StatusIncomplete:
		return fmt.Sprintf("The run did not finish (it was killed, or is still writing): %s. What was written so far is shown below.", what)
	}
	return "Nothing was judged: " + what + "."
}

// flagSubjects says what the flags are on, so that 18 flags of one GPU do not read as 18 problems.
func flagSubjects(p *page) string {
	var subj []string
	for _, f := range append(append([]flagView{}, p.Flags...), p.MoreFlags...) {
		on := f.On
		if on == "" {
			on = f.Subject
		}
		if !slices.Contains(subj, on) {
			subj = append(subj, on)
		}
	}
	switch {
	case len(subj) == 0:
		return ""
	case len(subj) == 1 && p.FlagCount > 1:
		return ", all on " + subj[0]
	case len(subj) == 1:
		return " on " + subj[0]
	case len(subj) > 3:
		return fmt.Sprintf(" on %d subjects (%s and %d more)", len(subj), strings.Join(subj[:3], "; "), len(subj)-3)
	}
	return fmt.Sprintf(" on %d subjects (%s)", len(subj), strings.Join(subj, "; "))
}

// anySkipped reports whether a check was skipped (DCGM absent, a microbenchmark or suite not run).
func anySkipped(s *results.Summary) bool {
	for _, h := range s.Hosts {
		if h.Health == nil {
			continue
		}
		if h.Health.DCGM != nil && h.Health.DCGM.Status == results.StatusSkipped {
			return true
		}
		for _, g := range h.Health.GPUs {
			if slices.ContainsFunc(g.Bench, func(b results.Microbench) bool { return b.Status == results.StatusSkipped }) {
				return true
			}
		}
	}
	return false
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// actions turns the kinds of flags into what to do next, most actionable first.
func actions(s *results.Summary, flags []flagView) []string {
	// who lists the subjects behind a kind of flag ("" when none), so each action names its targets.
	who := func(prefix string) string {
		seen := map[string]bool{}
		var subj []string
		for _, f := range flags {
			if strings.HasPrefix(f.Check, prefix) && !seen[f.Subject] {
				seen[f.Subject] = true
				subj = append(subj, f.Subject)
			}
		}
		if len(subj) > 3 {
			subj = append(subj[:3], fmt.Sprintf("%d more", len(subj)-3))
		}
		return strings.Join(subj, "; ")
	}
	var out []string
	add := func(prefix, text string) {
		if w := who(prefix); w != "" {
			out = append(out, text+" — "+w+".")
		}
	}
	if s.Status == results.StatusInterrupted {
		out = append(out, "The run was stopped (Ctrl-C or a signal) before it finished: run it again to finish; every figure already measured is kept in summary.json.")
	} else if len(allErrors(s)) > 0 {
		// Only an error is the run breaking: a failed GPU (health, wrong answers) is said below.
		out = append(out, "The run itself broke somewhere (errors above): fix that first; every figure already measured is kept in summary.json.")
	}
	add("health.", "Fix or replace the GPUs with health flags (cooling, seating, ECC, PCIe link), then re-run gpuvet on that host")
	add("compare.", "A card is slower than its siblings: compare its clocks, temperature and PCIe link with the others; swapping slots tells card from slot")
	add("gate.", "A gate failed: if the hardware is healthy and the gate does not fit this GPU × model, calibrate a reference-table entry (gpuvet calibrate); otherwise treat it as a regression")
	add("functional.", "The serving API misbehaved: read that endpoint's engine log, then re-run the functional suite")
	add("baseline.", "An environment is slower than bare metal beyond tolerance: check CPU pinning, NUMA affinity and hugepages there")
	if s.Status != results.StatusInterrupted && (hasInconclusive(s) || s.Status == results.StatusInconclusive) {
		out = append(out, "Some figures could not decide: the caveats say which and what would decide each (more requests, a longer load.max_duration, a less loaded client, a reference); re-run with that.")
	}
	if len(out) == 0 && s.Status == results.StatusOK {
		if sk := s.SkippedChecks(); len(sk) > 0 {
			out = append(out, "Nothing failed, but the run is partial: run what was skipped to complete it ("+strings.Join(sk, "; ")+").")
		} else {
			out = append(out, "Nothing to do. Keep this summary.json: it is the baseline later runs compare against (gpuvet compare).")
		}
	}
	if !s.Complete {
		out = append(out, "This run did not finish (killed or still running): the report shows what was written so far.")
	}
	return out
}

func hasInconclusive(s *results.Summary) bool {
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				if slices.ContainsFunc(e.Verdicts, func(v results.Verdict) bool { return v.Result == "inconclusive" }) {
					return true
				}
			}
		}
	}
	return false
}

func hostGPUs(h results.Host) []results.GPUInfo {
	if h.Health != nil && len(h.Health.GPUs) > 0 {
		out := make([]results.GPUInfo, len(h.Health.GPUs))
		for i, g := range h.Health.GPUs {
			out[i] = g.GPU
		}
		return out
	}
	return h.Discovery.GPUs
}

func platform(s *results.Summary) []kv {
	names := map[string]int{}
	var mem int64
	for _, h := range s.Hosts {
		for _, g := range hostGPUs(h) {
			names[g.Name]++
			mem = g.MemoryTotalMiB
		}
	}
	var gp []string
	for _, n := range platformNames(s) {
		gp = append(gp, fmt.Sprintf("%d × %s", names[n], n))
	}
	hosts := make([]string, len(s.Hosts))
	for i, h := range s.Hosts {
		hosts[i] = h.Name
	}
	if len(hosts) > fleetDetailHosts { // the fleet section lists every one
		hosts = append(hosts[:3], fmt.Sprintf("… %s hosts in all (the fleet section ranks each)", fleetview.Thousands(strconv.Itoa(len(s.Hosts)))))
	}
	gpus := strings.Join(gp, ", ")
	if mem > 0 {
		gpus += fmt.Sprintf(" (%.0f GiB each)", float64(mem)/1024)
	}
	env := s.Backend
	if s.Environment != "" {
		env += " (environment: " + s.Environment + ")"
	}
	if s.Meta.ParallelGPUs > 0 {
		env += fmt.Sprintf(", %d GPU%s loaded at a time", s.Meta.ParallelGPUs, plural(s.Meta.ParallelGPUs))
	}
	return []kv{{"Hosts", strings.Join(hosts, ", ")}, {"GPUs", orDash(gpus)},
		{"Driver / CUDA", orDash(s.Meta.DriverVersion) + " / " + orDash(s.Meta.CUDAVersion)},
		{"Engine", orDash(strings.TrimSpace(s.Meta.Engine + " " + s.Meta.EngineVersion))},
		{"Models", orDash(strings.Join(s.Meta.Models, ", "))}, {"Load profile", profile(s.Meta.LoadProfile)},
		{"Backend", orDash(env)}, {"gpuvet", strings.TrimSpace(s.Tool.Version + " " + s.Tool.Commit)}}
}

func profile(l *results.LoadConfig) string {
	if l == nil {
		return "—"
	}
	parts := []string{l.Profile}
	add := func(yes bool, format string, a ...any) {
		if yes {
			parts = append(parts, fmt.Sprintf(format, a...))
		}
	}
	add(l.API != "", "%s API", l.API)
	add(true, "%d prompt / %d output tokens", l.PromptTokens, l.OutputTokens)
	add(l.PrefixCount > 0 && l.PrefixTokens > 0, "%d shared prefixes of %d tokens", l.PrefixCount, l.PrefixTokens)
	add(l.Rates > 0, "%d rates", l.Rates)
	add(l.MaxConcurrency > 0, "max concurrency %d", l.MaxConcurrency)
	add(l.Concurrency > 0, "concurrency %d", l.Concurrency)
	add(l.Rate > 0, "rate %s req/s", num(l.Rate))
	add(l.MaxDuration > 0, "%s per rate", time.Duration(l.MaxDuration))
	add(l.Warmup != "", "warm-up %s", l.Warmup)
	add(l.Data != "", "%s data", l.Data)
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" || strings.TrimSpace(s) == "/" {
		return "—"
	}
	return s
}

// num prints a figure with sensible precision and thousands separators: 10512, 54.1, 6.42, 0.031.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	a := math.Abs(v)
	switch {
	case math.Round(a) >= 1000:
		return fleetview.Thousands(strconv.FormatFloat(v, 'f', 0, 64))
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0")
	case a >= 1:
		return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 2, 64), ".00")
	case a == 0:
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

func pct(r float64) string { return strconv.FormatFloat(r*100, 'f', 0, 64) + " %" }

func syncRun(l *results.Load) *results.Run {
	if l != nil {
		if i := slices.IndexFunc(l.Runs, func(r results.Run) bool { return r.Kind == "synchronous" }); i >= 0 {
			return &l.Runs[i]
		}
	}
	return nil
}

func kpis(s *results.Summary) []kpi {
	gpus := 0
	var bestRatio, peak, tpj float64
	var bestGEMM, peakAt, ttftAt, tpjAt string
	ttft := math.Inf(1)
	for _, h := range s.Hosts {
		gpus += len(hostGPUs(h))
		if h.Health != nil {
			for _, g := range h.Health.GPUs {
				for _, b := range g.Bench {
					if strings.Contains(b.Name, "gemm") && b.Ratio != nil && *b.Ratio > bestRatio && credited(h, []int{g.GPU.Index}) {
						bestRatio = *b.Ratio
						bestGEMM = fmt.Sprintf("%s %s %s on gpu %d", b.Name, num(b.Value), b.Unit, g.GPU.Index)
					}
				}
			}
		}
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				if !credited(h, e.GPUs) {
					continue
				}
				where := m.Model + " on " + gpuList(e.GPUs)
				if e.Load != nil && e.Load.PeakOutputTokS > peak {
					peak, peakAt = e.Load.PeakOutputTokS, where
				}
				if r := syncRun(e.Load); r != nil && r.TTFT.Count > 0 && r.TTFT.P95 < ttft {
					ttft, ttftAt = r.TTFT.P95, where
				}
				if e.Power != nil && e.Power.TokensPerJoule > tpj {
					tpj, tpjAt = e.Power.TokensPerJoule, where
				}
			}
		}
	}
	gemm := kpi{"Best GEMM vs peak", pct(bestRatio), bestGEMM}
	if bestRatio == 0 {
		gemm = kpi{"Best GEMM vs peak", "—", "no GEMM measured"}
	}
	return []kpi{{"GPUs tested", strconv.Itoa(gpus), strings.Join(platformNames(s), ", ")}, gemm,
		kpiOr("Peak output tok/s", peak > 0, num(peak), peakAt),
		kpiOr("Best sync TTFT p95", !math.IsInf(ttft, 1), num(ttft)+" ms", ttftAt),
		kpiOr("Tokens per watt", tpj > 0, num(tpj)+" tok/J", tpjAt+" (output tok/s per W at peak)")}
}

// credited reports whether the headline cards may show a figure measured on gpus: not when the
// judge flagged or failed one of them (a peak is no credit to a bad card).
func credited(h results.Host, gpus []int) bool {
	st := h.GPUStatus(gpus)
	return st != results.StatusFlag && st != results.StatusFailed
}

func kpiOr(label string, ok bool, v, note string) kpi {
	if !ok {
		return kpi{label, "—", "not measured"}
	}
	return kpi{label, v, note}
}

func platformNames(s *results.Summary) []string {
	seen := map[string]bool{}
	var out []string
	for _, h := range s.Hosts {
		for _, g := range hostGPUs(h) {
			if !seen[g.Name] {
				seen[g.Name] = true
				out = append(out, g.Name)
			}
		}
	}
	return out
}

var gpuList = fleetview.GPULabel

// caveats are the run's caveats and the shown hosts' own (DCGM skipped, a load interrupted). In a
// large fleet a caveat the merge prefixed with its host ("node-7: …") is said once, naming the first
// hosts and counting the rest, and the hosts not shown are counted per kind of caveat.
func caveats(s *results.Summary, shown []results.Host) []string {
	large := len(shown) < len(s.Hosts)
	out := append([]string(nil), s.Caveats...)
	if large {
		out = groupByHost(s, s.Caveats)
	}
	if !s.Complete {
		out = append(out, "summary.json is marked incomplete: the run was stopped or is still writing.")
	}
	for _, c := range s.SkippedChecks() {
		out = append(out, c+": not checked, so the run is partial, not a full pass.")
	}
	var own []string // "HOST: what", grouped in a large fleet
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				if e.Load != nil && e.Load.Interrupted {
					c := fmt.Sprintf("%s on %s: the load was interrupted; figures cover what ran.", m.Model, gpuList(e.GPUs))
					if large {
						c = h.Name + ": " + c
					}
					own = append(own, c)
				}
			}
		}
	}
	if large {
		own = groupByHost(s, own)
	}
	return append(out, own...)
}

// groupByHost says each caveat once: those of the form "HOST: what" become "h1, h2, h3 and N more
// hosts: what".
func groupByHost(s *results.Summary, cs []string) []string {
	order, who := fleetview.ByHost(s, cs)
	out := make([]string, 0, len(order))
	for _, what := range order {
		switch n := who[what]; {
		case len(n) == 0:
			out = append(out, what)
		case len(n) <= 3:
			out = append(out, strings.Join(n, ", ")+": "+what)
		default:
			out = append(out, fmt.Sprintf("%s and %d more hosts: %s", strings.Join(n[:3], ", "), len(n)-3, what))
		}
	}
	return out
}

func thresholds(s *results.Summary) []thresholdView {
	var out []thresholdView
	for _, k := range sortedKeys(s.Meta.Thresholds) {
		t := s.Meta.Thresholds[k]
		v := "disabled"
		if t.Value != nil {
			v = strings.TrimSpace(num(*t.Value) + " " + t.Unit)
		}
		out = append(out, thresholdView{k, v, t.Source})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// overview is one line per model per host shown: where to look first in a large run.
func overview(s *results.Summary, hosts []results.Host) []overviewRow {
	var out []overviewRow
	for _, h := range hosts {
		for _, m := range h.Models {
			r := overviewRow{Anchor: anchor(h.Name, m.Model), Host: h.Name, Model: m.Model, Status: string(m.Status)}
			count := map[results.Status]int{}
			var peaks, ttfts []float64
			lists := [][]results.Flag{m.Flags}
			for _, e := range m.Endpoints {
				count[e.Status]++
				lists = append(lists, e.Flags)
				if e.Load != nil && e.Load.PeakOutputTokS > 0 {
					peaks = append(peaks, e.Load.PeakOutputTokS)
				}
				if sr := syncRun(e.Load); sr != nil && sr.TTFT.Count > 0 {
					ttfts = append(ttfts, sr.TTFT.P95)
				}
			}
			var parts []string
			for _, st := range []results.Status{results.StatusOK, results.StatusInconclusive, results.StatusFlag, results.StatusFailed, results.StatusSkipped} {
				if count[st] > 0 {
					parts = append(parts, fmt.Sprintf("%d %s", count[st], st))
				}
			}
			r.Endpoints = orDash(strings.Join(parts, ", "))
			r.Peak, r.TTFT = span(peaks), span(ttfts)
			r.Flags = countFlags(lists...)
			out = append(out, r)
		}
	}
	return out
}

// span prints the range of values, "—" when there are none.
func span(v []float64) string {
	if len(v) == 0 {
		return "—"
	}
	lo, hi := slices.Min(v), slices.Max(v)
	if num(lo) == num(hi) {
		return num(lo)
	}
	return num(lo) + " – " + num(hi)
}

var anchorRe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// anchor is a fragment id for a host's model section (links work without script).
func anchor(parts ...string) string {
	return "m-" + anchorRe.ReplaceAllString(strings.Join(parts, "-"), "_")
}
