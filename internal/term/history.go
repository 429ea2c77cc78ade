package term

import (
	"fmt"
	"io"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// History prints what the run's history said: where it is kept, the drifts against each node's
// and GPU's acceptance run that did not pass (a flag, or undecided with the reason), how many
// passed, and its notes and error. Nothing when the run kept no history.
func History(w io.Writer, h *results.History) {
	if h == nil {
		return
	}
	var items []string
	if h.Error != "" {
		items = append(items, "ERROR: "+h.Error)
	}
	// A node that drifted as a whole is said once per figure: its GPUs' drifts in the same figure
	// are counted, not repeated (summary.json's history.drift lists every one).
	key := func(d results.Drift) string { return d.Host + "\x00" + d.Model + "\x00" + d.Metric }
	nodeSaid := map[string]string{}
	for _, d := range h.Drift {
		if d.Scope == "node" && d.Result != "pass" {
			nodeSaid[key(d)] = d.Result
		}
	}
	// A GPU's flag is folded under its node's flag; a GPU's undecided drift under its node's flag
	// or undecided drift; a GPU that flagged where its node did not is said.
	folds := func(d results.Drift) bool {
		n := nodeSaid[key(d)]
		return d.Scope != "node" && (n == string(results.StatusFlag) || (n != "" && n == d.Result))
	}
	pass, folded := 0, 0
	for _, d := range h.Drift {
		switch {
		case d.Result == "pass":
			pass++
		case folds(d):
			folded++
		case d.Result == string(results.StatusFlag):
			items = append(items, "DRIFT: "+d.Reason)
		default:
			items = append(items, "undecided: "+d.Reason)
		}
	}
	if folded > 0 {
		items = append(items, fmt.Sprintf("%d GPU figure(s) drifted with their node's, as above (each in summary.json's history.drift and the report)", folded))
	}
	if len(h.Drift) > 0 {
		items = append(items, fmt.Sprintf("%d figure(s) within %g %% of their acceptance run", pass, h.DriftPct))
	}
	items = append(items, h.Notes...)
	if r := h.Recorded; r != nil {
		items = append(items, fmt.Sprintf("recorded in %s: %d node(s), %d GPU(s), %d figures in %.2f s (plan fingerprint %s)", h.Store, r.Nodes, r.GPUs, r.Figures, r.Seconds, h.Fingerprint))
	}
	Block(w, "History (each node against its own acceptance run)", items)
}

// Trend prints runs oldest first, one a line: the date, the run, its status, then the headline
// figures (results.TrendMetrics); a run under another plan is marked and was never compared.
func Trend(w io.Writer, pts []results.TrendPoint) {
	keys, labels := results.TrendKeys(pts)
	t := NewTable(w, append([]string{"started (UTC)", "run", "status", "action"}, labels...)...)
	for _, p := range pts {
		st := string(p.Status)
		if p.Other {
			st += " (other plan)"
		}
		row := []string{p.At.UTC().Format("2006-01-02 15:04"), p.RunID, st, dash(p.Action)}
		for _, k := range keys {
			if v, ok := p.Figures[k]; ok {
				row = append(row, compare.Num(v))
			} else {
				row = append(row, "")
			}
		}
		t.Row(row...)
	}
	t.Flush()
	if len(pts) == 0 {
		fmt.Fprintln(w, "(no runs)")
	}
}
