package judge

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

// BaselineFor compares a finished run against a baseline read from path (gpuvet run --baseline
// FILE; nil base: unreadable, note says why) and stores the comparison in s.Baseline; Apply then
// turns breaches into flags.
func BaselineFor(base *results.Summary, note, path string, s *results.Summary, cfg Config) {
	var bc *results.BaselineComparison
	if base == nil {
		bc = &results.BaselineComparison{Note: note}
	} else {
		bc = CompareBaseline(base, []*results.Summary{s}, val(cfg.BaselineTolerancePct), cfg.LLMGuardsFrom())
	}
	bc.BaselineFile, bc.TolerancePctSrc = path, cfg.BaselineTolerancePct.Source
	s.Baseline = bc
}

// CompareSummaries is `gpuvet compare`: the baseline read from basePath (nil: unreadable, note says
// why) against the environments read from envPaths.
func CompareSummaries(base *results.Summary, note, basePath string, envs []*results.Summary, envPaths []string, cfg Config) *results.BaselineComparison {
	var bc *results.BaselineComparison
	if base == nil {
		bc = &results.BaselineComparison{Note: note, Environments: envNames(envs)}
	} else {
		bc = CompareBaseline(base, envs, val(cfg.BaselineTolerancePct), cfg.LLMGuardsFrom())
	}
	bc.BaselineFile, bc.TolerancePct, bc.TolerancePctSrc = basePath, val(cfg.BaselineTolerancePct), cfg.BaselineTolerancePct.Source
	bc.EnvironmentFiles = envPaths
	return bc
}

// WriteBaselineTable prints a comparison as a table: per subject and metric, the baseline, then for
// each environment its value, overhead % (positive = worse) and status; then caveats and flags.
func WriteBaselineTable(w io.Writer, bc *results.BaselineComparison) error {
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
		tw := term.Columns(w)
		head := []string{"SUBJECT", "METRIC", "BASELINE"}
		for _, e := range bc.Environments {
			head = append(head, strings.ToUpper(e), "OVERHEAD", "STATUS")
		}
		fmt.Fprintln(tw, strings.Join(head, "\t"))
		for _, r := range bc.Rows {
			cells := []string{r.Subject, r.Metric, fmtNum(r.Baseline)}
			for _, e := range bc.Environments {
				v, ok := r.Values[e]
				if !ok {
					cells = append(cells, "-", "-", r.Status[e])
					continue
				}
				cells = append(cells, fmtNum(v), fmt.Sprintf("%+.1f %%", r.OverheadPct[e]), r.Status[e])
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
	for _, fl := range BaselineFlags(bc) {
		fmt.Fprintf(w, "FLAG %s: %s\n", fl.Subject, fl.Reason)
	}
	return nil
}

func rowNotes(bc *results.BaselineComparison) []string {
	var out []string
	for _, r := range bc.Rows {
		envs := make([]string, 0, len(r.Notes))
		for e := range r.Notes {
			envs = append(envs, e)
		}
		sort.Strings(envs)
		for _, e := range envs {
			out = append(out, fmt.Sprintf("%s %s [%s] %s: %s", r.Subject, r.Metric, e, r.Status[e], r.Notes[e]))
		}
	}
	return out
}

// Breaches counts the breaching cells of a comparison.
func Breaches(bc *results.BaselineComparison) int { return len(BaselineFlags(bc)) }
