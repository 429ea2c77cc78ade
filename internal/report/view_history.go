package report

import (
	"fmt"
	"html/template"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// historyView is the run's history section (issue 47): each node's trend beside this run's
// figures, the drifts against its acceptance run that did not pass, and the history's notes.
type historyView struct {
	Store, Fingerprint, Margin, Error string
	Drift                             []driftRow
	Passed                            int
	Notes                             []string
	Nodes                             []trendView
}

type driftRow struct {
	Subject, Figure, Value, Reference, Delta, Interval, Against, Result, Class, Reason string
}

// trendView is one node's runs, oldest first, this run last and marked.
type trendView struct {
	Host   string
	Labels []string
	Sparks []template.HTML // one small line per figure, over the runs
	Rows   []trendRow
}

type trendRow struct {
	At, RunID, Status string
	Current, Other    bool
	Cells             []string
}

func buildHistory(s *results.Summary) *historyView {
	h := s.History
	if h == nil {
		return nil
	}
	v := &historyView{Store: h.Store, Fingerprint: h.Fingerprint, Error: h.Error, Notes: h.Notes}
	if h.DriftPct > 0 {
		v.Margin = fmt.Sprintf("%g %% (%s)", h.DriftPct, h.DriftPctSource)
	}
	for _, d := range h.Drift {
		if d.Result == "pass" {
			v.Passed++
			continue
		}
		subj := "node " + d.Host
		if d.Scope == "gpu" {
			subj = fmt.Sprintf("%s gpu %d (%s)", d.Host, d.GPU, d.UUID)
		}
		row := driftRow{Subject: subj, Figure: strings.TrimSpace(d.Model + " " + d.Metric), Value: num(d.Value), Reference: num(d.Reference),
			Delta: fmt.Sprintf("%.1f %%", d.DeltaPct), Against: d.AcceptanceRun + " (" + d.AcceptanceAt.UTC().Format("2006-01-02") + ")",
			Result: d.Result, Reason: d.Reason}
		if d.DeltaCI != nil {
			row.Interval = fmt.Sprintf("[%.1f %%, %.1f %%]", d.DeltaCI.Lo, d.DeltaCI.Hi)
		}
		if d.Result == string(results.StatusFlag) {
			row.Class = "flag"
		}
		v.Drift = append(v.Drift, row)
	}
	byHost := map[string][]results.TrendPoint{}
	var order []string
	for _, p := range h.Trend {
		if byHost[p.Host] == nil {
			order = append(order, p.Host)
		}
		byHost[p.Host] = append(byHost[p.Host], p)
	}
	for _, host := range order {
		v.Nodes = append(v.Nodes, buildTrend(host, byHost[host], s.RunID))
	}
	return v
}

func buildTrend(host string, pts []results.TrendPoint, current string) trendView {
	keys, labels := results.TrendKeys(pts)
	t := trendView{Host: host, Labels: labels}
	for _, k := range keys {
		var vals []float64
		for _, p := range pts {
			if x, ok := p.Figures[k]; ok && !p.Other {
				vals = append(vals, x)
			}
		}
		t.Sparks = append(t.Sparks, spark(vals))
	}
	for _, p := range pts {
		r := trendRow{At: p.At.UTC().Format("2006-01-02 15:04"), RunID: p.RunID, Status: string(p.Status), Current: p.RunID == current, Other: p.Other}
		for _, k := range keys {
			c := "—"
			if x, ok := p.Figures[k]; ok {
				c = num(x)
			}
			r.Cells = append(r.Cells, c)
		}
		t.Rows = append(t.Rows, r)
	}
	return t
}

// spark is a 60 × 16 line through vals (oldest first), the last point marked: the shape of a
// figure over a node's runs under this plan. Nothing for fewer than two.
func spark(vals []float64) template.HTML {
	if len(vals) < 2 {
		return ""
	}
	lo, hi := slices.Min(vals), slices.Max(vals)
	const w, h = 60.0, 16.0
	var pts []string
	var lx, ly float64
	for i, x := range vals {
		lx = float64(i) / float64(len(vals)-1) * (w - 4)
		ly = h / 2
		if hi > lo {
			ly = (h - 3) - (x-lo)/(hi-lo)*(h-6)
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", lx+2, ly))
	}
	return template.HTML(fmt.Sprintf(`<svg class="spark" width="60" height="16" viewBox="0 0 60 16" role="img" aria-label="trend"><polyline fill="none" stroke="#4a6fa5" stroke-width="1.2" points="%s"/><circle cx="%.1f" cy="%.1f" r="1.8" fill="#4a6fa5"/></svg>`,
		strings.Join(pts, " "), lx+2, ly))
}
