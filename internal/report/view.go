package report

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The view is the summary arranged for reading: everything the template prints is computed here, so
// the template holds layout only and this file holds the choices (what is a KPI, what opens by default).

type kv struct{ K, V string }

type kpi struct{ Label, Value, Note string }

type flagView struct {
	Scope, Subject, Check, Reason string
}

type page struct {
	Title      string
	RunID      string
	Generated  string
	Status     string // ok, flag, failed, skipped
	StatusWord string // PASS, WARN, FAIL, SKIPPED
	Headline   string
	Flags      []flagView
	Actions    []string
	Errors     []string
	Incomplete bool
	Platform   []kv
	KPIs       []kpi
	Hosts      []hostView
	Baseline   *baselineView
	Caveats    []string
	Thresholds []thresholdView
	Settings   []kv
	Large      bool // many sections: collapse what is fine
}

type thresholdView struct{ Name, Value, Source string }

type hostView struct {
	Name, Status, Error, Discovery string
	Flags                          int
	Health                         *healthView
	Models                         []modelView
}

type healthView struct {
	Source, Status, Error string
	Open                  bool
	Notes                 []string
	Inventory             []invRow
	BenchCols             []string
	Bench                 []benchRow
	DCGM                  string
	DCGMStatus            string
	Compare               *compareTable
	Burn                  template.HTML
}

type invRow struct {
	GPU, Name, UUID, Bus, NUMA, Memory, PCIe, ECC, Clocks, Events, Temp, Power, Status string
	PCIeBad, ECCBad, EventsBad                                                         bool
}

type cell struct {
	Text, Class, Tip string
}

type benchRow struct {
	GPU    string
	Cells  []cell
	Burn   cell
	DCGM   cell
	Status string
}

type modelView struct {
	Model, Engine, Status, Error string
	Open                         bool
	Flags                        int
	GateCols                     []string
	Rows                         []epRow
	Throughput, TTFT, Power      template.HTML
	Functional                   *funcTable
	Compare                      *compareTable
	Notes                        []string
}

type epRow struct {
	GPU, Status, Sustained, Peak, TTFT, ITL, TPOT, TokPerJ, PowerW, Provision, Error string
	Gates                                                                            []cell
	LowerBound                                                                       bool
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
	File, Note string
	Envs       []string
	Rows       []baseRow
	Chart      template.HTML
	Caveats    []string
}

type baseRow struct {
	Subject, Metric, Baseline string
	Cells                     []cell // per environment: value and overhead
}

var statusWord = map[results.Status]string{results.StatusOK: "PASS", results.StatusFlag: "WARN", results.StatusFailed: "FAIL", results.StatusSkipped: "SKIPPED"}

func buildPage(s *results.Summary) *page {
	p := &page{Title: "gpuvet report", RunID: s.RunID, Status: string(s.Status), StatusWord: statusWord[s.Status], Incomplete: !s.Complete}
	if p.StatusWord == "" {
		p.Status, p.StatusWord = "skipped", "UNKNOWN"
	}
	p.Generated = s.StartedAt.UTC().Format("2006-01-02 15:04 UTC")
	if !s.FinishedAt.IsZero() {
		p.Generated += " – " + s.FinishedAt.UTC().Format("15:04 UTC") + " (" + s.FinishedAt.Sub(s.StartedAt).Round(time.Second).String() + ")"
	}
	p.Flags = allFlags(s)
	p.Errors = allErrors(s)
	p.Headline = headline(s, p)
	p.Actions = actions(s, p.Flags)
	p.Platform = platform(s)
	p.KPIs = kpis(s)
	sections := 0
	for _, h := range s.Hosts {
		sections += 1 + len(h.Models)
	}
	p.Large = sections > 4
	for _, h := range s.Hosts {
		p.Hosts = append(p.Hosts, buildHost(s, h, p.Large))
	}
	if s.Baseline != nil {
		p.Baseline = buildBaseline(s)
	}
	p.Caveats = caveats(s)
	p.Thresholds = thresholds(s)
	for _, k := range sortedKeys(s.Meta.Settings) {
		p.Settings = append(p.Settings, kv{k, s.Meta.Settings[k]})
	}
	return p
}

// allFlags gathers every flag of the run once: phases may copy a flag up to its host and run.
func allFlags(s *results.Summary) []flagView {
	seen := map[flagView]bool{}
	var out []flagView
	add := func(fs []results.Flag) {
		for _, f := range fs {
			v := flagView{f.Scope, f.Subject, f.Check, f.Reason}
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	add(s.Flags)
	for _, h := range s.Hosts {
		add(h.Flags)
		if h.Health != nil {
			add(h.Health.Flags)
			for _, g := range h.Health.GPUs {
				add(g.Flags)
			}
		}
		for _, m := range h.Models {
			add(m.Flags)
			for _, e := range m.Endpoints {
				add(e.Flags)
			}
		}
	}
	return out
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
		for _, m := range h.Models {
			add(m.Model, m.Error)
			for _, e := range m.Endpoints {
				add(m.Model+" on "+gpuList(e.GPUs), e.Error)
				if e.Load != nil {
					add(m.Model+" on "+gpuList(e.GPUs)+" load", e.Load.Error)
				}
				if e.Functional != nil {
					add(m.Model+" on "+gpuList(e.GPUs)+" functional suite", e.Functional.Error)
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
		return "Every check passed: " + what + "."
	case results.StatusFlag:
		return fmt.Sprintf("%d flag%s raised: %s. The hardware serves, but not everything is as it should be.", len(p.Flags), plural(len(p.Flags)), what)
	case results.StatusFailed:
		return fmt.Sprintf("The run failed: %s. What was measured is shown below.", what)
	}
	return "Nothing was judged: " + what + "."
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// actions turns the kinds of flags into what to do next, most actionable first.
func actions(s *results.Summary, flags []flagView) []string {
	has := func(prefix string) bool {
		for _, f := range flags {
			if strings.HasPrefix(f.Check, prefix) {
				return true
			}
		}
		return false
	}
	var out []string
	if s.Status == results.StatusFailed || s.Error != "" {
		out = append(out, "The run itself broke somewhere (errors above): fix that first; every figure already measured is kept in summary.json.")
	}
	if has("health.") {
		out = append(out, "Fix or replace the GPUs with health flags (cooling, seating, ECC, PCIe link), then re-run gpuvet on that host.")
	}
	if has("compare.") {
		out = append(out, "A card is slower than its siblings: compare its clocks, temperature and PCIe link with the others; swapping slots tells card from slot.")
	}
	if has("gate.") {
		out = append(out, "A gate failed: if the hardware is healthy and the gate does not fit this GPU × model, calibrate a reference-table entry (gpuvet calibrate); otherwise treat it as a regression.")
	}
	if has("functional.") {
		out = append(out, "The serving API misbehaved: read that endpoint's engine log, then re-run the functional suite.")
	}
	if has("baseline.") {
		out = append(out, "An environment is slower than bare metal beyond tolerance: check CPU pinning, NUMA affinity and hugepages there.")
	}
	if hasInconclusive(s) {
		out = append(out, "Some throughput figures are lower bounds (marked *): re-run those sweeps to decide their gates.")
	}
	if len(out) == 0 && s.Status == results.StatusOK {
		out = append(out, "Nothing to do. Keep this summary.json: it is the baseline later runs compare against (gpuvet compare).")
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
				for _, v := range e.Verdicts {
					if v.Result == "inconclusive" {
						return true
					}
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
	var out []kv
	names := map[string]int{}
	var order []string
	var mem int64
	for _, h := range s.Hosts {
		for _, g := range hostGPUs(h) {
			if names[g.Name] == 0 {
				order = append(order, g.Name)
			}
			names[g.Name]++
			mem = g.MemoryTotalMiB
		}
	}
	var gp []string
	for _, n := range order {
		gp = append(gp, fmt.Sprintf("%d × %s", names[n], n))
	}
	hosts := make([]string, len(s.Hosts))
	for i, h := range s.Hosts {
		hosts[i] = h.Name
	}
	out = append(out, kv{"Hosts", strings.Join(hosts, ", ")})
	gpus := strings.Join(gp, ", ")
	if mem > 0 {
		gpus += fmt.Sprintf(" (%.0f GiB each)", float64(mem)/1024)
	}
	out = append(out, kv{"GPUs", orDash(gpus)})
	out = append(out, kv{"Driver / CUDA", orDash(s.Meta.DriverVersion) + " / " + orDash(s.Meta.CUDAVersion)})
	out = append(out, kv{"Engine", orDash(strings.TrimSpace(s.Meta.Engine + " " + s.Meta.EngineVersion))})
	out = append(out, kv{"Models", orDash(strings.Join(s.Meta.Models, ", "))})
	out = append(out, kv{"Load profile", profile(s.Meta.LoadProfile)})
	env := s.Backend
	if s.Environment != "" {
		env += " (environment: " + s.Environment + ")"
	}
	if s.Meta.ParallelGPUs > 0 {
		env += fmt.Sprintf(", %d GPU%s loaded at a time", s.Meta.ParallelGPUs, plural(s.Meta.ParallelGPUs))
	}
	out = append(out, kv{"Backend", orDash(env)})
	out = append(out, kv{"gpuvet", strings.TrimSpace(s.Tool.Version + " " + s.Tool.Commit)})
	return out
}

func profile(l *results.LoadConfig) string {
	if l == nil {
		return "—"
	}
	parts := []string{l.Profile}
	if l.API != "" {
		parts = append(parts, l.API+" API")
	}
	parts = append(parts, fmt.Sprintf("%d prompt / %d output tokens", l.PromptTokens, l.OutputTokens))
	if l.Rates > 0 {
		parts = append(parts, fmt.Sprintf("%d rates", l.Rates))
	}
	if l.MaxConcurrency > 0 {
		parts = append(parts, fmt.Sprintf("max concurrency %d", l.MaxConcurrency))
	}
	if l.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("concurrency %d", l.Concurrency))
	}
	if l.Rate > 0 {
		parts = append(parts, fmt.Sprintf("rate %s req/s", num(l.Rate)))
	}
	if l.MaxDuration > 0 {
		parts = append(parts, time.Duration(l.MaxDuration).String()+" per rate")
	}
	if l.Warmup != "" {
		parts = append(parts, "warm-up "+l.Warmup)
	}
	if l.Data != "" {
		parts = append(parts, l.Data+" data")
	}
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
	case a >= 1000:
		return group(strconv.FormatFloat(v, 'f', 0, 64))
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

func group(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteRune(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func pct(r float64) string { return strconv.FormatFloat(r*100, 'f', 0, 64) + " %" }

func syncRun(l *results.Load) *results.Run {
	if l == nil {
		return nil
	}
	for i := range l.Runs {
		if l.Runs[i].Kind == "synchronous" {
			return &l.Runs[i]
		}
	}
	return nil
}

func kpis(s *results.Summary) []kpi {
	gpus := 0
	var bestRatio float64
	var bestGEMM string
	for _, h := range s.Hosts {
		gpus += len(hostGPUs(h))
		if h.Health == nil {
			continue
		}
		for _, g := range h.Health.GPUs {
			for _, b := range g.Bench {
				if strings.Contains(b.Name, "gemm") && b.Ratio != nil && *b.Ratio > bestRatio {
					bestRatio = *b.Ratio
					bestGEMM = fmt.Sprintf("%s %s %s on gpu %d", b.Name, num(b.Value), b.Unit, g.GPU.Index)
				}
			}
		}
	}
	out := []kpi{{"GPUs tested", strconv.Itoa(gpus), strings.Join(platformNames(s), ", ")}}
	if bestRatio > 0 {
		out = append(out, kpi{"Best GEMM vs peak", pct(bestRatio), bestGEMM})
	} else {
		out = append(out, kpi{"Best GEMM vs peak", "—", "no GEMM measured"})
	}
	var peak, ttft, tpj float64
	var peakAt, ttftAt, tpjAt string
	ttft = math.Inf(1)
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
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
	out = append(out, kpiOr("Peak output tok/s", peak > 0, num(peak), peakAt))
	out = append(out, kpiOr("Best sync TTFT p95", !math.IsInf(ttft, 1), num(ttft)+" ms", ttftAt))
	out = append(out, kpiOr("Tokens per watt", tpj > 0, num(tpj)+" tok/J", tpjAt+" (output tok/s per W at peak)"))
	return out
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

func gpuList(gpus []int) string {
	if len(gpus) == 1 {
		return "gpu " + strconv.Itoa(gpus[0])
	}
	s := make([]string, len(gpus))
	for i, g := range gpus {
		s[i] = strconv.Itoa(g)
	}
	return "gpus " + strings.Join(s, ",")
}

func buildHost(s *results.Summary, h results.Host, large bool) hostView {
	hv := hostView{Name: h.Name, Status: string(h.Status), Error: h.Error, Flags: len(h.Flags)}
	hv.Discovery = h.Discovery.Source
	if h.Discovery.Note != "" {
		hv.Discovery += ": " + h.Discovery.Note
	}
	if h.Health != nil {
		hv.Health = buildHealth(h.Health, large)
	}
	for _, m := range h.Models {
		hv.Models = append(hv.Models, buildModel(s, m, large, powerLimit(h)))
	}
	return hv
}

func statusClass(st results.Status) string {
	switch st {
	case results.StatusOK:
		return "ok"
	case results.StatusFlag:
		return "flag"
	case results.StatusFailed:
		return "failed"
	}
	return "skipped"
}

// benchOrder puts the microbenchmarks in a reading order; unknown names follow, sorted.
var benchOrder = []string{"sgemm_fp32", "gemm_tf32", "gemm_bf16", "hbm_d2d", "pcie_h2d", "pcie_d2h"}

func buildHealth(h *results.Health, large bool) *healthView {
	hv := &healthView{Source: h.Source, Status: string(h.Status), Error: h.Error, Notes: h.Notes}
	hv.Open = !large || h.Status != results.StatusOK
	present := map[string]bool{}
	for _, g := range h.GPUs {
		for _, b := range g.Bench {
			present[b.Name] = true
		}
	}
	for _, n := range benchOrder {
		if present[n] {
			hv.BenchCols = append(hv.BenchCols, n)
			delete(present, n)
		}
	}
	hv.BenchCols = append(hv.BenchCols, sortedKeys(present)...)
	dcgmByGPU := map[int][]results.DCGMTest{}
	if h.DCGM != nil {
		hv.DCGMStatus = string(h.DCGM.Status)
		hv.DCGM = fmt.Sprintf("DCGM diag level %d", h.DCGM.Level)
		if h.DCGM.Version != "" {
			hv.DCGM += " (DCGM " + h.DCGM.Version + ")"
		}
		hv.DCGM += ": " + string(h.DCGM.Status)
		if h.DCGM.Note != "" {
			hv.DCGM += " — " + h.DCGM.Note
		}
		for _, t := range h.DCGM.Tests {
			if t.GPU != nil {
				dcgmByGPU[*t.GPU] = append(dcgmByGPU[*t.GPU], t)
			}
		}
	}
	var burn []Series
	for _, g := range h.GPUs {
		hv.Inventory = append(hv.Inventory, inventoryRow(g))
		row := benchRow{GPU: strconv.Itoa(g.GPU.Index), Status: string(g.Status)}
		byName := map[string]results.Microbench{}
		for _, b := range g.Bench {
			byName[b.Name] = b
		}
		for _, n := range hv.BenchCols {
			b, ok := byName[n]
			if !ok {
				row.Cells = append(row.Cells, cell{Text: "—"})
				continue
			}
			row.Cells = append(row.Cells, benchCell(b))
		}
		row.Burn = burnCell(g.Burn)
		row.DCGM = dcgmCell(dcgmByGPU[g.GPU.Index], h.DCGM)
		hv.Bench = append(hv.Bench, row)
		if g.Burn != nil && len(g.Burn.Samples) > 0 {
			sr := Series{Name: "gpu " + strconv.Itoa(g.GPU.Index)}
			for _, p := range g.Burn.Samples {
				sr.Points = append(sr.Points, Point{X: p.T, Y: p.PowerW})
			}
			burn = append(burn, sr)
		}
	}
	if len(burn) > 0 {
		hv.Burn = LineChart{Title: "Power during the burn, per GPU", XLabel: "seconds", YLabel: "W", Series: burn, Refs: powerRefs(h)}.SVG()
	}
	hv.Compare = compares(h.Comparisons)
	return hv
}

func powerRefs(h *results.Health) []RefLine {
	if l := powerLimit(results.Host{Health: h}); l > 0 {
		return []RefLine{{Y: l, Label: "power limit " + num(l) + " W"}}
	}
	return nil
}

func inventoryRow(g results.GPUHealth) invRow {
	i := g.GPU
	r := invRow{GPU: strconv.Itoa(i.Index), Name: i.Name, UUID: i.UUID, Bus: i.PCIBusID, Status: string(g.Status)}
	r.NUMA = strconv.Itoa(i.NUMANode)
	if i.NUMANode < 0 {
		r.NUMA = "unknown"
	}
	r.Memory = fmt.Sprintf("%.0f GiB", float64(i.MemoryTotalMiB)/1024)
	if i.PCIe.GenCurrent > 0 {
		r.PCIe = fmt.Sprintf("Gen%d x%d", i.PCIe.GenCurrent, i.PCIe.WidthCurrent)
		if i.PCIe.GenMax != i.PCIe.GenCurrent || i.PCIe.WidthMax != i.PCIe.WidthCurrent {
			r.PCIe += fmt.Sprintf(" (max Gen%d x%d)", i.PCIe.GenMax, i.PCIe.WidthMax)
		}
		r.PCIeBad = i.PCIe.WidthCurrent < i.PCIe.WidthMax
	} else {
		r.PCIe = "—"
	}
	r.ECC = "—"
	if i.ECC.VolatileUncorrected != nil || i.ECC.AggregateUncorrected != nil {
		r.ECC = fmt.Sprintf("%s / %s", i64s(i.ECC.VolatileUncorrected), i64s(i.ECC.AggregateUncorrected))
		r.ECCBad = (i.ECC.VolatileUncorrected != nil && *i.ECC.VolatileUncorrected > 0) || (i.ECC.AggregateUncorrected != nil && *i.ECC.AggregateUncorrected > 0)
	}
	if i.ECCEnabled != nil && !*i.ECCEnabled {
		r.ECC = "ECC off"
	}
	if i.RemappedRows != nil && (i.RemappedRows.Failure || i.RemappedRows.Uncorrectable > 0) {
		r.ECC += fmt.Sprintf("; remapped rows: %d uncorrectable", i.RemappedRows.Uncorrectable)
		r.ECCBad = true
	}
	r.Clocks = "—"
	if i.SMClockMHz != nil && i.MaxSMClockMHz != nil {
		r.Clocks = fmt.Sprintf("%d / %d MHz", *i.SMClockMHz, *i.MaxSMClockMHz)
	}
	r.Events = strings.Join(i.ClockEvents.Names, ", ")
	if r.Events == "" {
		r.Events = "none"
	}
	// 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake: the failure mask.
	r.EventsBad = i.ClockEvents.Mask&(0x8|0x20|0x40|0x80) != 0
	if i.TemperatureC != nil {
		r.Temp = strconv.Itoa(*i.TemperatureC) + " °C"
	}
	if i.PowerDrawW != nil && i.PowerLimitW != nil {
		r.Power = fmt.Sprintf("%s / %s W", num(*i.PowerDrawW), num(*i.PowerLimitW))
	}
	return r
}

func i64s(p *int64) string {
	if p == nil {
		return "—"
	}
	return strconv.FormatInt(*p, 10)
}

func benchCell(b results.Microbench) cell {
	if b.Error != "" || b.Status == results.StatusFailed {
		return cell{Text: "failed", Class: "failed", Tip: b.Error}
	}
	c := cell{Text: num(b.Value) + " " + b.Unit, Tip: b.Params}
	if b.Ratio != nil {
		c.Text += " · " + pct(*b.Ratio)
		if b.Peak != nil {
			c.Tip = strings.TrimPrefix(c.Tip+"; datasheet peak "+num(*b.Peak)+" "+b.Unit, "; ")
		}
	}
	c.Class = statusClass(b.Status)
	if b.Status == results.StatusOK {
		c.Class = ""
	}
	return c
}

func burnCell(b *results.Burn) cell {
	if b == nil {
		return cell{Text: "—"}
	}
	if b.Error != "" {
		return cell{Text: "failed", Class: "failed", Tip: b.Error}
	}
	c := cell{Text: fmt.Sprintf("%s TFLOP/s, %s W mean, ≥ %d MHz, ≤ %d °C", num(b.TFLOPS), num(b.PowerMeanW), b.MinSMClockMHz, b.MaxTempC)}
	c.Tip = fmt.Sprintf("%s; max %s W of %s W; clock events seen: %s", time.Duration(b.Duration), num(b.PowerMaxW), num(b.PowerLimitW), strings.Join(b.ReasonsSeen, ", "))
	for _, r := range b.ReasonsSeen {
		if r != "sw_power_cap" && r != "gpu_idle" && r != "applications_clocks_setting" && r != "sync_boost" {
			c.Class = "flag"
			c.Text += " · " + r
		}
	}
	return c
}

func dcgmCell(ts []results.DCGMTest, d *results.DCGM) cell {
	if d == nil {
		return cell{Text: "not run"}
	}
	if len(ts) == 0 {
		return cell{Text: string(d.Status), Class: statusClass(d.Status)}
	}
	counts := map[string]int{}
	var bad []string
	for _, t := range ts {
		counts[t.Result]++
		if t.Result == "fail" || t.Result == "warn" {
			bad = append(bad, t.Name+" "+t.Result)
		}
	}
	var parts []string
	for _, r := range []string{"pass", "warn", "fail", "skip"} {
		if counts[r] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
		}
	}
	c := cell{Text: strings.Join(parts, ", "), Tip: strings.Join(bad, "; ")}
	switch {
	case counts["fail"] > 0:
		c.Class = "failed"
	case counts["warn"] > 0:
		c.Class = "flag"
	}
	if len(bad) > 0 {
		c.Text += " (" + strings.Join(bad, ", ") + ")"
	}
	return c
}

func compares(cs []results.Compare) *compareTable {
	if len(cs) == 0 {
		return nil
	}
	t := &compareTable{}
	gpus := map[int]bool{}
	for _, c := range cs {
		for _, v := range c.Values {
			gpus[v.GPU] = true
		}
	}
	var idx []int
	for g := range gpus {
		idx = append(idx, g)
	}
	sort.Ints(idx)
	for _, g := range idx {
		t.Cols = append(t.Cols, "gpu "+strconv.Itoa(g))
	}
	for _, c := range cs {
		rule := fmt.Sprintf("within %g %% of the best", c.VariancePct)
		if c.HigherIsBetter {
			rule = "higher is better; " + rule
		} else {
			rule = "lower is better; " + rule
		}
		row := compareRow{Metric: c.Metric, Rule: rule, Best: num(c.Best), Note: c.Note}
		if c.LowConfidence {
			row.Note = strings.TrimPrefix(row.Note+"; low confidence: nothing flagged", "; ")
		}
		by := map[int]results.CompareCell{}
		for _, v := range c.Values {
			by[v.GPU] = v
		}
		for _, g := range idx {
			v, ok := by[g]
			if !ok {
				row.Cells = append(row.Cells, cell{Text: "—"})
				continue
			}
			cl := cell{Text: num(v.Value), Tip: v.Reason}
			if v.DeltaPct != 0 {
				cl.Text += fmt.Sprintf(" (%s)", signedPct(-v.DeltaPct))
			}
			switch {
			case v.Flagged:
				cl.Class = "flag"
			case v.LowerBound:
				cl.Class = "lb"
				cl.Text = "≥ " + cl.Text + " *"
			}
			row.Cells = append(row.Cells, cl)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func signedPct(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if v > 0 {
		s = "+" + s
	}
	return s + " %"
}

func buildModel(s *results.Summary, m results.Model, large bool, limit float64) modelView {
	mv := modelView{Model: m.Model, Status: string(m.Status), Error: m.Error, Flags: len(m.Flags), Notes: m.Notes}
	mv.Engine = strings.TrimSpace(m.Engine.Kind + " " + m.Engine.Version)
	if m.Engine.TP > 1 {
		mv.Engine += fmt.Sprintf(", tp %d", m.Engine.TP)
	}
	mv.Open = !large || m.Status != results.StatusOK
	seen := map[string]bool{}
	for _, e := range m.Endpoints {
		for _, v := range e.Verdicts {
			if !seen[v.Check] {
				seen[v.Check] = true
				mv.GateCols = append(mv.GateCols, v.Check)
			}
		}
	}
	for _, e := range m.Endpoints {
		mv.Rows = append(mv.Rows, endpointRow(e, mv.GateCols))
		if e.Load != nil && e.Load.Client.ClientLimited {
			mv.Notes = append(mv.Notes, fmt.Sprintf("%s: the load generator, not the server, was the bottleneck (%s): its figures understate the GPU", gpuList(e.GPUs), e.Load.Client.Reason))
		}
		if e.Load != nil && e.Load.Saturation.LowerBound() {
			mv.Notes = append(mv.Notes, fmt.Sprintf("%s: throughput is a lower bound: %s", gpuList(e.GPUs), orDash(e.Load.Saturation.Reason)))
		}
	}
	mv.Throughput, mv.TTFT = sweepCharts(m, ttftSLO(s, m))
	mv.Power = powerChart(m, limit)
	mv.Functional = functional(m)
	mv.Compare = compares(m.Comparisons)
	return mv
}

func endpointRow(e results.Endpoint, cols []string) epRow {
	r := epRow{GPU: gpuList(e.GPUs), Status: string(e.Status), Error: e.Error}
	r.Sustained, r.Peak, r.TTFT, r.ITL, r.TPOT, r.TokPerJ, r.PowerW, r.Provision = "—", "—", "—", "—", "—", "—", "—", "—"
	if l := e.Load; l != nil {
		r.LowerBound = l.Saturation.LowerBound()
		pre, post := "", ""
		if r.LowerBound {
			pre, post = "≥ ", " *"
		}
		if l.SustainedReqS > 0 {
			r.Sustained = pre + num(l.SustainedReqS) + post
		}
		if l.PeakOutputTokS > 0 {
			r.Peak = pre + num(l.PeakOutputTokS) + post
		}
		if s := syncRun(l); s != nil {
			r.TTFT, r.ITL, r.TPOT = p95(s.TTFT), p95(s.ITL), p95(s.TPOT)
		}
	}
	if e.Power != nil {
		r.PowerW = num(e.Power.MeanW) + " / " + num(e.Power.MaxW)
		if e.Power.TokensPerJoule > 0 {
			r.TokPerJ = num(e.Power.TokensPerJoule)
		}
	}
	if e.ProvisionSeconds > 0 {
		r.Provision = num(e.ProvisionSeconds) + " s"
	}
	by := map[string]results.Verdict{}
	for _, v := range e.Verdicts {
		by[v.Check] = v
	}
	for _, c := range cols {
		v, ok := by[c]
		if !ok {
			r.Gates = append(r.Gates, cell{Text: "—"})
			continue
		}
		r.Gates = append(r.Gates, gateCell(v))
	}
	return r
}

func p95(d results.Dist) string {
	if d.Count == 0 {
		return "—"
	}
	return num(d.P95)
}

// gateCell marks reference-table decisions "(ref)" and inconclusive ones "*", as the seed's report does.
func gateCell(v results.Verdict) cell {
	c := cell{Class: v.Result}
	switch v.Result {
	case "pass":
		c.Text = "ok"
	case "fail":
		c.Text = "FAIL"
	case "inconclusive":
		c.Text = "inconclusive *"
	case "disabled":
		c.Text = "off"
		c.Class = "off"
	default:
		c.Text = v.Result
	}
	if isRef(v.Source) {
		c.Text += " (ref)"
	}
	if v.Value != nil {
		c.Text = num(*v.Value) + " " + c.Text
	}
	tip := v.Rule
	if v.Threshold != nil {
		tip += fmt.Sprintf(" — threshold %s %s", num(*v.Threshold), v.Unit)
	}
	tip += " — source: " + v.Source
	if v.Reason != "" {
		tip += " — " + v.Reason
	}
	c.Tip = tip
	return c
}

func isRef(src string) bool { return strings.HasPrefix(src, "reference") }

// ttftSLO finds the TTFT p95 gate in force for a model's endpoints (the reference table may set it).
func ttftSLO(s *results.Summary, m results.Model) *RefLine {
	for _, e := range m.Endpoints {
		for _, v := range e.Verdicts {
			if v.Check == "gate.ttft_p95" && v.Threshold != nil && v.Result != "disabled" {
				l := "SLO " + num(*v.Threshold) + " ms"
				if isRef(v.Source) {
					l += " (ref)"
				}
				return &RefLine{Y: *v.Threshold, Label: l}
			}
		}
	}
	if t, ok := s.Meta.Thresholds["ttft_p95_ms"]; ok && t.Value != nil {
		return &RefLine{Y: *t.Value, Label: "SLO " + num(*t.Value) + " ms"}
	}
	return nil
}

// sweepCharts draws output tok/s and TTFT p95 against achieved req/s, one line per endpoint.
func sweepCharts(m results.Model, slo *RefLine) (template.HTML, template.HTML) {
	var thr, ttft []Series
	for _, e := range m.Endpoints {
		if e.Load == nil || len(e.Load.Runs) == 0 {
			continue
		}
		lb := e.Load.Saturation.LowerBound()
		name := gpuList(e.GPUs)
		if lb {
			name += " (lower bound)"
		}
		runs := append([]results.Run(nil), e.Load.Runs...)
		sort.SliceStable(runs, func(i, j int) bool { return runs[i].ReqS < runs[j].ReqS })
		a, b := Series{Name: name, Dashed: lb}, Series{Name: name, Dashed: lb}
		for _, r := range runs {
			if r.Requests.Successful == 0 {
				continue
			}
			label := r.Kind
			if r.TargetRate > 0 {
				label += " " + num(r.TargetRate) + " req/s"
			}
			a.Points = append(a.Points, Point{X: r.ReqS, Y: r.OutputTokS, Open: lb,
				Tip: fmt.Sprintf("%s, %s: %s req/s, %s tok/s", name, label, num(r.ReqS), num(r.OutputTokS))})
			// The throughput probe runs max_concurrency requests at once: its TTFT is queueing, and
			// drawn here it would flatten the curve the SLO is read against.
			if r.TTFT.Count > 0 && r.Kind != "throughput" {
				b.Points = append(b.Points, Point{X: r.ReqS, Y: r.TTFT.P95, Open: lb,
					Tip: fmt.Sprintf("%s, %s: %s req/s, TTFT p95 %s ms (n=%d)", name, label, num(r.ReqS), num(r.TTFT.P95), r.TTFT.Count)})
			}
		}
		thr, ttft = append(thr, a), append(ttft, b)
	}
	if len(thr) == 0 {
		return "", ""
	}
	var refs []RefLine
	if slo != nil {
		refs = append(refs, *slo)
	}
	return LineChart{Title: "Output tok/s vs achieved req/s", XLabel: "achieved req/s", YLabel: "output tok/s", Series: thr, Markers: true}.SVG(),
		LineChart{Title: "TTFT p95 vs achieved req/s (probe left out)", XLabel: "achieved req/s", YLabel: "TTFT p95 (ms)", Series: ttft, Refs: refs, Markers: true}.SVG()
}

// powerLimit is the host's GPU power limit (the first GPU that reports one), 0 when unknown.
func powerLimit(h results.Host) float64 {
	for _, g := range hostGPUs(h) {
		if g.PowerLimitW != nil {
			return *g.PowerLimitW
		}
	}
	return 0
}

func powerChart(m results.Model, limit float64) template.HTML {
	var ss []Series
	for _, e := range m.Endpoints {
		if e.Power == nil || len(e.Power.Samples) == 0 {
			continue
		}
		sr := Series{Name: gpuList(e.GPUs)}
		for _, p := range e.Power.Samples {
			sr.Points = append(sr.Points, Point{X: p.T, Y: p.PowerW})
		}
		ss = append(ss, sr)
	}
	if len(ss) == 0 {
		return ""
	}
	c := LineChart{Title: "Power during the load, per GPU", XLabel: "seconds since load start", YLabel: "W", Series: ss}
	if limit > 0 {
		c.Refs = []RefLine{{Y: limit, Label: "power limit " + num(limit) + " W"}}
	}
	return c.SVG()
}

func functional(m results.Model) *funcTable {
	t := &funcTable{}
	var names []string
	seen := map[string]bool{}
	any := false
	for _, e := range m.Endpoints {
		t.Cols = append(t.Cols, gpuList(e.GPUs))
		if e.Functional == nil {
			continue
		}
		any = true
		for _, ft := range e.Functional.Tests {
			if !seen[ft.Name] {
				seen[ft.Name] = true
				names = append(names, ft.Name)
			}
			if !ft.Passed {
				t.Fails = append(t.Fails, kv{gpuList(e.GPUs) + " · " + ft.Name, orDash(ft.Detail)})
			}
		}
		if e.Functional.Error != "" {
			t.Fails = append(t.Fails, kv{gpuList(e.GPUs) + " · suite", e.Functional.Error})
		}
	}
	if !any {
		return nil
	}
	for _, n := range names {
		row := funcRow{Name: n}
		for _, e := range m.Endpoints {
			c := cell{Text: "—"}
			if e.Functional != nil {
				for _, ft := range e.Functional.Tests {
					if ft.Name == n {
						c = cell{Text: "pass", Class: "pass", Tip: ft.Detail}
						if !ft.Passed {
							c = cell{Text: "FAIL", Class: "fail", Tip: ft.Detail}
						}
					}
				}
			}
			row.Cells = append(row.Cells, c)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func buildBaseline(s *results.Summary) *baselineView {
	b := s.Baseline
	v := &baselineView{File: b.BaselineFile, Note: b.Note, Envs: b.Environments, Caveats: b.Caveats}
	tol := 10.0
	if t, ok := s.Meta.Thresholds["baseline_tolerance_pct"]; ok && t.Value != nil {
		tol = *t.Value
	}
	chart := BarChart{Title: "Overhead vs bare metal (positive = worse)", XLabel: "overhead %", Series: b.Environments, Refs: []float64{tol}, RefLabel: "tolerance " + num(tol) + " %"}
	for _, r := range b.Rows {
		row := baseRow{Subject: r.Subject, Metric: r.Metric, Baseline: num(r.Baseline)}
		g := BarGroup{Label: r.Subject + " · " + r.Metric}
		for _, env := range b.Environments {
			val, ok := r.Values[env]
			if !ok {
				row.Cells = append(row.Cells, cell{Text: "—"})
				continue
			}
			st := r.Status[env]
			ov := r.OverheadPct[env]
			c := cell{Text: fmt.Sprintf("%s (%s)", num(val), signedPct(ov)), Class: st, Tip: env + ": " + st}
			if st == "lower_bound" || st == "low_confidence" {
				c.Text += " *"
			}
			row.Cells = append(row.Cells, c)
			g.Bars = append(g.Bars, Bar{Series: env, Value: ov, Bad: st == "breach", Hatch: st == "lower_bound" || st == "low_confidence",
				Tip: fmt.Sprintf("%s %s in %s: %s vs %s bare metal (%s, %s)", r.Subject, r.Metric, env, num(val), num(r.Baseline), signedPct(ov), st)})
		}
		v.Rows = append(v.Rows, row)
		chart.Groups = append(chart.Groups, g)
	}
	if len(chart.Groups) > maxOverheadBars {
		chart = worstPerMetric(b, chart)
	}
	if len(chart.Groups) > 0 {
		v.Chart = chart.SVG()
	}
	return v
}

// maxOverheadBars is how many row groups the overhead chart draws before it summarises.
const maxOverheadBars = 24

// worstPerMetric summarises a large comparison: per metric, the worst overhead of each environment
// over all subjects, so the chart stays one screen (the table keeps every row).
func worstPerMetric(b *results.BaselineComparison, c BarChart) BarChart {
	type key struct{ metric, env string }
	worst := map[key]results.OverheadRow{}
	count := map[string]int{}
	var metrics []string
	for _, r := range b.Rows {
		if count[r.Metric] == 0 {
			metrics = append(metrics, r.Metric)
		}
		count[r.Metric]++
		for _, env := range b.Environments {
			k := key{r.Metric, env}
			if _, ok := r.OverheadPct[env]; !ok {
				continue
			}
			if w, ok := worst[k]; !ok || r.OverheadPct[env] > w.OverheadPct[env] {
				worst[k] = r
			}
		}
	}
	c.Title = "Worst overhead per metric vs bare metal (positive = worse)"
	c.Groups = nil
	for _, m := range metrics {
		g := BarGroup{Label: fmt.Sprintf("%s (worst of %d)", m, count[m])}
		for _, env := range b.Environments {
			r, ok := worst[key{m, env}]
			if !ok {
				continue
			}
			st := r.Status[env]
			g.Bars = append(g.Bars, Bar{Series: env, Value: r.OverheadPct[env], Bad: st == "breach", Hatch: st == "lower_bound" || st == "low_confidence",
				Tip: fmt.Sprintf("worst %s in %s: %s (%s, %s)", m, env, r.Subject, signedPct(r.OverheadPct[env]), st)})
		}
		c.Groups = append(c.Groups, g)
	}
	return c
}

func caveats(s *results.Summary) []string {
	out := append([]string(nil), s.Caveats...)
	if !s.Complete {
		out = append(out, "summary.json is marked incomplete: the run was stopped or is still writing.")
	}
	for _, h := range s.Hosts {
		if h.Health != nil && h.Health.DCGM != nil && h.Health.DCGM.Status == results.StatusSkipped {
			out = append(out, h.Name+": DCGM diagnostics were skipped ("+orDash(h.Health.DCGM.Note)+"): this is not a pass.")
		}
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				if e.Load != nil && e.Load.Interrupted {
					out = append(out, fmt.Sprintf("%s on %s: the load was interrupted; figures cover what ran.", m.Model, gpuList(e.GPUs)))
				}
			}
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

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
