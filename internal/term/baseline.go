package term

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Baseline prints a comparison as a table: per subject and metric, the baseline, then for each
// environment its value, overhead % (positive = worse) and status; then caveats and the flags the
// judge raised on it (judge.BaselineFlags).
func Baseline(w io.Writer, bc *results.BaselineComparison, flags []results.Flag) error {
	fmt.Fprintf(w, "baseline: %s (tolerance %g %%", bc.BaselineFile, bc.TolerancePct)
	if bc.TolerancePctSrc != "" {
		fmt.Fprintf(w, ", %s", bc.TolerancePctSrc)
	}
	fmt.Fprintln(w, ")")
	for i, e := range bc.Environments {
		if i < len(bc.EnvironmentFiles) && bc.EnvironmentFiles[i] != e {
			fmt.Fprintf(w, "%s: %s\n", e, bc.EnvironmentFiles[i])
		}
	}
	if bc.Note != "" {
		fmt.Fprintln(w, bc.Note)
	}
	if len(bc.Rows) > 0 {
		tw := Columns(w)
		head := []string{"SUBJECT", "METRIC", "BASELINE"}
		for _, e := range bc.Environments {
			head = append(head, strings.ToUpper(e), "OVERHEAD", "STATUS")
		}
		fmt.Fprintln(tw, strings.Join(head, "\t"))
		for _, r := range bc.Rows {
			cells := []string{r.Subject, r.Metric, compare.Num(r.Baseline)}
			for _, e := range bc.Environments {
				v, ok := r.Values[e]
				if !ok {
					cells = append(cells, "-", "-", r.Status[e])
					continue
				}
				cells = append(cells, compare.Num(v), fmt.Sprintf("%+.1f %%", r.OverheadPct[e]), r.Status[e])
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	notes := rowNotes(bc)
	for _, n := range notes {
		fmt.Fprintln(w, "note:", n)
	}
	for _, c := range bc.Caveats {
		fmt.Fprintln(w, "caveat:", c)
	}
	for _, fl := range flags {
		fmt.Fprintf(w, "FLAG %s: %s\n", fl.Subject, fl.Reason)
	}
	return nil
}

func rowNotes(bc *results.BaselineComparison) []string {
	var out []string
	for _, r := range bc.Rows {
		for _, e := range slices.Sorted(maps.Keys(r.Notes)) {
			out = append(out, fmt.Sprintf("%s %s [%s] %s: %s", r.Subject, r.Metric, e, r.Status[e], r.Notes[e]))
		}
	}
	return out
}
