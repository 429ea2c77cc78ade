package report

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

func buildModel(s *results.Summary, h results.Host, m results.Model, large bool, limit float64) modelView {
	host := h.Name
	lists := [][]results.Flag{m.Flags}
	for _, e := range m.Endpoints {
		lists = append(lists, e.Flags)
	}
	mv := modelView{Anchor: anchor(host, m.Model), Model: m.Model, Status: string(m.Status), Error: m.Error, Flags: countFlags(lists...), Notes: m.Notes}
	mv.Engine = strings.TrimSpace(m.Engine.Kind + " " + m.Engine.Version)
	if m.Engine.TP > 1 {
		mv.Engine += fmt.Sprintf(", tp %d", m.Engine.TP)
	}
	mv.Open = !large || m.Status != results.StatusOK
	cols, heads, off := gateColumns(m)
	mv.GateHeads = heads
	if len(off) > 0 {
		mv.Notes = append(mv.Notes, "Gates disabled (no threshold set): "+strings.Join(off, ", ")+".")
	}
	for _, e := range m.Endpoints {
		mv.Rows = append(mv.Rows, endpointRow(h, e, cols))
		if n := errorNote(e); n != "" {
			mv.Notes = append(mv.Notes, n)
		}
		if e.Load != nil && e.Load.Client.ClientLimited {
			mv.Notes = append(mv.Notes, fmt.Sprintf("%s: the load generator, not the server, was the bottleneck (%s): its figures understate the GPU", gpuList(e.GPUs), firstClause(e.Load.Client.Reason)))
		}
		if e.Load != nil && e.Load.Saturation.LowerBound() {
			mv.Notes = append(mv.Notes, fmt.Sprintf("%s: throughput is a lower bound: %s", gpuList(e.GPUs), orDash(e.Load.Saturation.Reason)))
		}
	}
	mv.Throughput, mv.TTFT = sweepCharts(m, ttftSLO(s, m))
	mv.Power = powerChart(m, limit)
	mv.Workload = workloadCharts(m)
	mv.Functional = functional(m)
	mv.Compare = compares(m.Comparisons)
	return mv
}

// gateColumns gives one column per gate, in first-seen order; a gate disabled on every endpoint
// gets no column (a column of "off" says nothing) and is returned in off for a note.
func gateColumns(m results.Model) (cols []string, heads []kv, off []string) {
	seen := map[string]bool{}
	live := map[string]bool{}
	var all []string
	for _, e := range m.Endpoints {
		for _, v := range e.Verdicts {
			if !seen[v.Check] {
				seen[v.Check] = true
				all = append(all, v.Check)
			}
			if v.Result != "disabled" {
				live[v.Check] = true
			}
		}
	}
	for _, c := range all {
		if live[c] {
			cols = append(cols, c)
			heads = append(heads, kv{c, gateLabel(c)})
		} else {
			off = append(off, c)
		}
	}
	return cols, heads, off
}

// countFlags counts distinct flags over lists that may repeat each other.
func countFlags(lists ...[]results.Flag) int {
	seen := map[results.Flag]bool{}
	for _, l := range lists {
		for _, f := range l {
			seen[f] = true
		}
	}
	return len(seen)
}

// firstClause shortens a long machine-made reason to its first clause for a one-line note.
func firstClause(s string) string {
	if i := strings.IndexAny(s, ";"); i > 0 {
		s = s[:i]
	}
	return clip(strings.TrimSpace(s), 160)
}

// gateLabel is a short column title for a gate check id.
func gateLabel(check string) string {
	if t, ok := results.GateByCheck(check); ok {
		return t.Label
	}
	return strings.TrimPrefix(check, "gate.")
}

// endpointRow is one endpoint's row; its status is its GPUs' judged verdict (the worst of their
// health and serving), the one the terminal and the other files show, with the serving verdict
// beside it when they differ.
func endpointRow(h results.Host, e results.Endpoint, cols []string) epRow {
	r := epRow{GPU: gpuList(e.GPUs), Status: string(e.Status), Error: e.Error, LogTail: e.LogTail, LogFile: e.LogFile}
	if st := h.GPUStatus(e.GPUs); st != "" && st != e.Status {
		r.Status, r.StatusTip = string(st), "serving "+string(e.Status)
	}
	r.Sustained, r.Peak, r.TTFT, r.ITL, r.TPOT, r.TokPerJ, r.PowerW = "—", "—", "—", "—", "—", "—", "—"
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
	r.SOL = "—"
	if s := e.SpeedOfLight; s != nil {
		r.SOLTip = s.Note
		if s.BoundOutputTokS > 0 {
			r.SOL = fmt.Sprintf("%.1f %% of %s", s.Percent, num(s.BoundOutputTokS))
			r.SOLTip = fmt.Sprintf("bound %s tok/s (%s-bound on the %s datasheet, tp %d) at batch %.1f: %s; %.0f prompt / %.0f output tokens per request; model from %s",
				num(s.BoundOutputTokS), s.Limit, s.GPU, s.TP, s.Batch, s.BatchSource, s.PromptTokens, s.OutputTokens, s.Model)
			if s.Impossible {
				r.SOL += " (impossible)"
				r.SOLTip = s.Note + "; " + r.SOLTip
			}
			if s.Marked != "" {
				kind, _, _ := strings.Cut(s.Marked, ":")
				r.SOL += " (" + kind + ")"
				r.SOLTip = s.Marked + "; " + r.SOLTip
			}
		}
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
	c := cell{Text: v.Result, Class: v.Result}
	if t, ok := map[string]string{"pass": "ok", "fail": "FAIL", "inconclusive": "inconclusive *", "disabled": "off"}[v.Result]; ok {
		c.Text = t
	}
	if v.Result == "disabled" {
		c.Class = "off"
	}
	if isRef(v.Source) {
		c.Text += " (ref)"
	}
	if v.Value != nil {
		c.Text = num(*v.Value) + " " + c.Text
	}
	c.Tip = v.Rule
	if v.Threshold != nil {
		c.Tip += fmt.Sprintf(" — threshold %s %s", num(*v.Threshold), v.Unit)
	}
	c.Tip += " — source: " + v.Source
	if v.Reason != "" {
		c.Tip += " — " + v.Reason
	}
	return c
}

func isRef(src string) bool { return strings.HasPrefix(src, "reference") }

// ttftSLO finds the TTFT p95 gate in force for a model's endpoints (the reference table may set it).
func ttftSLO(s *results.Summary, m results.Model) *RefLine {
	gate := results.ThresholdOf(results.ThTTFTP95Ms)
	for _, e := range m.Endpoints {
		for _, v := range e.Verdicts {
			if v.Check == gate.Check && v.Threshold != nil && v.Result != "disabled" {
				l := "SLO " + num(*v.Threshold) + " ms"
				if isRef(v.Source) {
					l += " (ref)"
				}
				return &RefLine{Y: *v.Threshold, Label: l}
			}
		}
	}
	if t, ok := s.Meta.Thresholds[gate.Summary]; ok && t.Value != nil {
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
		// The curve follows the load the client asked for (sync, then rates or concurrencies upward),
		// not the achieved rate: past the knee achieved req/s falls back, and the curve must show it.
		sort.SliceStable(runs, func(i, j int) bool { return runOrder(runs[i]) < runOrder(runs[j]) })
		a, b := Series{Name: name, Dashed: lb}, Series{Name: name, Dashed: lb}
		for _, r := range runs {
			if r.Requests.Successful == 0 {
				continue
			}
			label := r.Kind
			if r.TargetRate > 0 {
				label += " " + num(r.TargetRate) + " req/s"
			}
			// The throughput probe is another regime (max_concurrency at once): a lone square.
			a.Points = append(a.Points, Point{X: r.ReqS, Y: r.OutputTokS, Open: lb, Alone: r.Kind == "throughput",
				Tip: fmt.Sprintf("%s, %s: %s req/s, %s tok/s", name, label, num(r.ReqS), num(r.OutputTokS))})
			// The throughput probe runs max_concurrency requests at once: its TTFT is queueing, and
			// drawn here it would flatten the curve the SLO is read against.
			if r.TTFT.Count > 0 && r.Kind != "throughput" {
				tip := fmt.Sprintf("%s, %s: %s req/s, TTFT p95 %s ms (n=%d)", name, label, num(r.ReqS), num(r.TTFT.P95), r.TTFT.Count)
				if r.LatencyFrom != "" {
					tip += ": " + r.LatencyFrom
				}
				b.Points = append(b.Points, Point{X: r.ReqS, Y: r.TTFT.P95, Open: lb, Tip: tip})
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
	return LineChart{Title: "Output tok/s vs achieved req/s (■ throughput probe)", XLabel: "achieved req/s", YLabel: "output tok/s", Series: thr, Markers: true}.SVG(),
		LineChart{Title: "TTFT p95 vs achieved req/s (probe left out)", XLabel: "achieved req/s", YLabel: "TTFT p95 (ms)", Series: ttft, Refs: refs, Markers: true, YCap: ttftCap(slo)}.SVG()
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

// runOrder sorts the runs of a profile by the load asked for.
func runOrder(r results.Run) float64 {
	switch r.Kind {
	case "synchronous":
		return -1
	case "throughput":
		return math.Inf(1)
	}
	if r.TargetRate > 0 {
		return r.TargetRate
	}
	return float64(r.Concurrency)
}

func powerChart(m results.Model, limit float64) template.HTML {
	var ss []Series
	var evs []EventLine
	for _, e := range m.Endpoints {
		if e.Power == nil || len(e.Power.Samples) == 0 {
			continue
		}
		sr := Series{Name: gpuList(e.GPUs)}
		for _, p := range e.Power.Samples {
			sr.Points = append(sr.Points, Point{X: p.T, Y: p.PowerW})
		}
		ss = append(ss, sr)
		// When another process appeared on the GPU during the load (issue 26).
		for _, b := range e.Busy {
			if b.T != nil {
				evs = append(evs, EventLine{X: *b.T, Label: gpuList(e.GPUs) + " shared: " + b.Reason})
			}
		}
	}
	if len(ss) == 0 {
		return ""
	}
	c := LineChart{Title: "Power during the load, per GPU", XLabel: "seconds since load start", YLabel: "W", Series: ss, Events: evs}
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

// errorNote sums the failed requests of an endpoint's runs by class, or "" when none failed.
func errorNote(e results.Endpoint) string {
	if e.Load == nil {
		return ""
	}
	byClass := map[string]int{}
	total, all := 0, 0
	for _, r := range e.Load.Runs {
		all += r.Requests.Successful + r.Requests.Errored
		for c, n := range r.Errors {
			byClass[c] += n
			total += n
		}
		if len(r.Errors) == 0 && r.Requests.Errored > 0 {
			byClass["unclassified"] += r.Requests.Errored
			total += r.Requests.Errored
		}
	}
	if total == 0 {
		return ""
	}
	var parts []string
	for _, c := range sortedKeys(byClass) {
		parts = append(parts, fmt.Sprintf("%s %d", c, byClass[c]))
	}
	return fmt.Sprintf("%s: %d of %d requests failed (%s)", gpuList(e.GPUs), total, all, strings.Join(parts, ", "))
}

// ttftCap keeps the TTFT chart readable around its SLO: past 3 × the SLO, the curve is simply "far
// too slow" and the axis stops there (the exact figure is in the point's tooltip).
func ttftCap(slo *RefLine) float64 {
	if slo == nil {
		return 0
	}
	return 3 * slo.Y
}
