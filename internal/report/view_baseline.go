package report

import (
	"fmt"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

func buildBaseline(s *results.Summary) *baselineView {
	b := s.Baseline
	v := &baselineView{File: b.BaselineFile, Note: b.Note, Envs: b.Environments, Caveats: b.Caveats}
	tol := 10.0 // the seeds' default, when the file does not say
	if t, ok := s.Meta.Thresholds[results.ThresholdOf(results.ThBaselineTolerance).Summary]; ok && t.Value != nil {
		tol = *t.Value
	}
	if b.TolerancePct > 0 {
		tol = b.TolerancePct
	}
	chart := BarChart{Title: "Overhead vs bare metal (positive = worse)", XLabel: "overhead %", Series: b.Environments, Refs: []float64{tol}, RefLabel: "tolerance " + num(tol) + " %"}
	for _, r := range b.Rows {
		row := baseRow{Subject: r.Subject, Metric: r.Metric, Baseline: num(r.Baseline)}
		g := BarGroup{Label: r.Subject + " · " + r.Metric}
		for _, env := range b.Environments {
			val, ok := r.Values[env]
			st := r.Status[env]
			note := r.Notes[env]
			if !ok || st == "missing" {
				row.Cells = append(row.Cells, cell{Text: "—", Tip: strings.TrimSuffix(env+": not measured; "+note, "; ")})
				continue
			}
			ov := r.OverheadPct[env]
			c := cell{Text: fmt.Sprintf("%s (%s)", num(val), signedPct(ov)), Class: st, Tip: strings.TrimSuffix(env+": "+st+"; "+note, "; ")}
			if d, ok := r.DetectablePct[env]; ok && d > 0 { // issue 35: what a pass of this row means
				c.Tip += fmt.Sprintf("; this row would have shown an overhead ≥ %s %%", num(d))
			}
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
	v.Summary = baselineSummary(b)
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
			if _, ok := r.OverheadPct[env]; !ok || r.Status[env] == "missing" {
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

// baselineSummary is the one line to read first: how many comparisons breached, and the worst.
func baselineSummary(b *results.BaselineComparison) string {
	var n, breaches int
	worst, worstAt := 0.0, ""
	for _, r := range b.Rows {
		for _, env := range b.Environments {
			st, ok := r.Status[env]
			if !ok || st == "missing" {
				continue
			}
			n++
			if st == "breach" {
				breaches++
				if p := r.OverheadPct[env]; worstAt == "" || p > worst {
					worst, worstAt = p, fmt.Sprintf("%s %s in %s", r.Subject, r.Metric, env)
				}
			}
		}
	}
	if n == 0 {
		return ""
	}
	if breaches == 0 {
		return fmt.Sprintf("No breach in %d comparisons.", n)
	}
	return fmt.Sprintf("%d breach%s in %d comparisons; worst: %s, %s.", breaches, map[bool]string{true: "", false: "es"}[breaches == 1], n, worstAt, signedPct(worst))
}
