package judge

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gpuvet/gpuvet/internal/importer"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

// ReadBaseline reads a baseline in any format the importer knows (gpuvet summary, vLLM bench,
// guidellm). A missing or corrupt baseline is not an error: it returns nil and the note to show
// ("no comparison: …"), so a run or a compare degrades instead of failing.
func ReadBaseline(path string) (*results.Summary, string) {
	s, _, err := importer.Read(path)
	if err != nil {
		return nil, fmt.Sprintf("no comparison: baseline %s unreadable (%v)", path, err)
	}
	return s, ""
}

// ReadResult reads one environment's result in any supported format. Imported files (which record
// no environment of their own) are named by their path; gpuvet runs by their label and path.
func ReadResult(path string) (*results.Summary, error) {
	s, f, err := importer.Read(path)
	if err != nil {
		return nil, err
	}
	// A run without its own label is named by its path (two runs are often both summary.json).
	if s.Environment == "" || f != importer.FormatGPUVet {
		s.Environment = path
	}
	return s, nil
}

// BaselineFor compares a finished run against a baseline file (gpuvet run --baseline FILE) and
// stores the comparison in s.Baseline; Apply then turns breaches into flags.
func BaselineFor(path string, s *results.Summary, cfg Config) {
	base, note := ReadBaseline(path)
	var bc *results.BaselineComparison
	if base == nil {
		bc = &results.BaselineComparison{Note: note}
	} else {
		bc = CompareBaseline(base, []*results.Summary{s}, val(cfg.BaselineTolerancePct), cfg.LLMGuardsFrom())
	}
	bc.BaselineFile, bc.TolerancePctSrc = path, cfg.BaselineTolerancePct.Source
	s.Baseline = bc
}

// CompareFiles is `gpuvet compare`: the baseline file against one or more result files. An
// unreadable baseline degrades to a note; an unreadable result file is an error (it is the input
// the user asked about).
func CompareFiles(basePath string, envPaths []string, cfg Config) (*results.BaselineComparison, error) {
	var envs []*results.Summary
	for _, p := range envPaths {
		s, err := ReadResult(p)
		if err != nil {
			return nil, err
		}
		envs = append(envs, s)
	}
	base, note := ReadBaseline(basePath)
	var bc *results.BaselineComparison
	if base == nil {
		bc = &results.BaselineComparison{Note: note, Environments: envNames(envs)}
	} else {
		bc = CompareBaseline(base, envs, val(cfg.BaselineTolerancePct), cfg.LLMGuardsFrom())
	}
	bc.BaselineFile, bc.TolerancePct, bc.TolerancePctSrc = basePath, val(cfg.BaselineTolerancePct), cfg.BaselineTolerancePct.Source
	bc.EnvironmentFiles = envPaths
	return bc, nil
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
