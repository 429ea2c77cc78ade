package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

func (r *run) summaryPath() string { return filepath.Join(r.out, "summary.json") }

// flush rewrites summary.json atomically with what is known now.
func (r *run) flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum.Outputs = results.OutputFiles(r.out, r.sum.StartedAt)
	return results.WriteJSON(r.summaryPath(), r.sum)
}

func (r *run) flushLogged() {
	if err := r.flush(); err != nil {
		r.progress("WARNING: could not write %s: %v", r.summaryPath(), err)
	}
}

// baseline compares against --baseline before the judge runs, so breaches become flags.
func (r *run) baseline(ctx context.Context) {
	if r.cfg.Run.Baseline == "" || ctx.Err() != nil {
		return
	}
	if r.deps.Baseline == nil {
		r.sum.Caveats = append(r.sum.Caveats, "baseline "+r.cfg.Run.Baseline+" not compared: no baseline comparison in this build")
		return
	}
	if err := protect(func() error { return r.deps.Baseline(r.sum, r.cfg.Run.Baseline, r.plan) }); err != nil {
		r.sum.Baseline = &results.BaselineComparison{BaselineFile: r.cfg.Run.Baseline, Note: "no comparison: " + err.Error()}
	}
}

// history runs one history step (Deps.History or Deps.Record); a failure is a caveat, never the run's.
func (r *run) history(ctx context.Context, step func(context.Context, *results.Summary, *config.Plan), what string) {
	if step != nil {
		if err := protect(func() error { step(ctx, r.sum, r.plan); return nil }); err != nil {
			r.sum.Caveats = append(r.sum.Caveats, "history not "+what+": "+err.Error())
		}
	}
}

func (r *run) judge() {
	r.sum.Caveats = append(r.sum.Caveats, rungNotes(r.sum)...)
	r.sum.Caveats = append(r.sum.Caveats, unusedGPUKeys(r.cfg, r.deps.Catalog, r.host().Discovery.GPUs)...)
	if r.deps.Judge == nil {
		r.sum.Caveats = append(r.sum.Caveats, "no judge in this build: gates, reference table and GPU-to-GPU comparisons were not applied")
		rollup(r.sum)
		return
	}
	err := protect(func() error {
		if err := r.inject("judge", 0); err != nil {
			return err
		}
		return r.deps.Judge(r.sum, r.plan)
	})
	if err != nil {
		r.sum.Error = results.JoinErr(r.sum.Error, "judge: "+err.Error())
		r.sum.Status = results.StatusFailed
	}
	rollup(r.sum)
}

// rungNotes are the caveats of every rung that measured less than it ran for (transient, or ended by
// its errors).
func rungNotes(s *results.Summary) []string {
	var out []string
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, ep := range m.Endpoints {
				for _, n := range ep.Load.RungNotes() {
					out = append(out, fmt.Sprintf("%s on gpu %v: %s", m.Model, ep.GPUs, n))
				}
			}
		}
	}
	return out
}

// rollup raises every status to at least the worst of what it contains (it never lowers one the
// judge set) and collects flags upward.
func rollup(s *results.Summary) {
	for hi := range s.Hosts {
		h := &s.Hosts[hi]
		raise(&h.Status, h.Error, h.Flags)
		if h.Health != nil {
			raise(&h.Health.Status, h.Health.Error, nil)
			h.Status = results.Worse(h.Status, h.Health.Status)
		}
		for mi := range h.Models {
			m := &h.Models[mi]
			raise(&m.Status, m.Error, m.Flags)
			for ei := range m.Endpoints {
				e := &m.Endpoints[ei]
				raise(&e.Status, e.Error, e.Flags)
				m.Status = results.Worse(m.Status, e.Status)
			}
			h.Status = results.Worse(h.Status, m.Status)
		}
		h.Status = cmp.Or(h.Status, results.StatusOK)
		s.Status = results.Worse(s.Status, h.Status)
	}
	raise(&s.Status, s.Error, s.Flags)
}

// raise lifts *st to failed when err is set and to flag when flags fired (Worse ranks them apart from
// every other status, so its place in a rollup does not matter).
func raise(st *results.Status, err string, flags []results.Flag) {
	if err != "" {
		*st = results.Worse(*st, results.StatusFailed)
	}
	if len(flags) > 0 {
		*st = results.Worse(*st, results.StatusFlag)
	}
}

// finish writes the final summary (complete=true unless interrupted), the baseline and the reports.
func (r *run) finish(ctx context.Context) {
	r.sum.FinishedAt = time.Now().UTC()
	r.sum.Timing.TotalSeconds = r.sum.FinishedAt.Sub(r.sum.StartedAt).Seconds()
	if ctx.Err() != nil {
		r.sum.Error = results.JoinErr(r.sum.Error, "interrupted ("+context.Cause(ctx).Error()+"): "+interruptedWhat(r.sum)+"; results are partial")
		r.sum.Status = results.StatusInterrupted
	} else {
		r.sum.Complete = true
	}
	r.history(ctx, r.deps.Record, "recorded")
	if err := r.flush(); err != nil {
		r.unwritten = err
		r.sum.Caveats = append(r.sum.Caveats, fmt.Sprintf("summary.json not written: %v (what was measured is only in this output and the reports)", err))
		r.progress("ERROR: the final %s was not written: %v (exit 1: what was measured is not on disk)", r.summaryPath(), err)
	}
	if r.cfg.Run.SaveBaseline && r.sum.Complete {
		if err := results.WriteJSON(filepath.Join(r.out, "baseline.json"), r.sum); err != nil {
			r.progress("WARNING: baseline.json not written: %v", err)
		}
	}
	if r.deps.Report != nil {
		err := protect(func() error {
			if err := r.inject("write", 0); err != nil {
				return err
			}
			return r.deps.Report(r.sum, r.out, r.cfg.Output)
		})
		if err != nil {
			r.sum.Caveats = append(r.sum.Caveats, "report not written: "+err.Error())
			r.progress("report: FAILED: %v", err)
			r.flushLogged()
		}
	}
}

func (r *run) exitCode() int {
	code := r.verdictCode()
	if code == 0 && (r.notRecorded() || r.unwritten != nil) {
		// The README's exit-1 row: a result that could not be written after it was measured. The
		// run's status stays what was measured; the history's error says what to fix.
		return 1
	}
	return code
}

// notRecorded says the history was on and this run could not be written to it.
func (r *run) notRecorded() bool {
	h := r.sum.History
	return r.cfg.History.Enabled && r.deps.Record != nil && h != nil && h.Recorded == nil && h.Error != ""
}

// verdictCode is the exit code the run's verdicts give.
func (r *run) verdictCode() int {
	if r.cfg.Run.Acceptance {
		return judge.AcceptanceExitCode(r.sum)
	}
	if r.deps.ExitCode != nil {
		return r.deps.ExitCode(r.sum, r.cfg.Run.FailOnFlag, r.cfg.Run.FailOnInconclusive)
	}
	if st, run := r.sum.Status, r.cfg.Run; st == results.StatusFailed || st == results.StatusFlag && run.FailOnFlag ||
		st == results.StatusInconclusive && run.FailOnInconclusive {
		return 1
	}
	return 0
}

// interruptedWhat names the endpoints running when the run was stopped and counts those not run.
func interruptedWhat(s *results.Summary) string {
	var running []string
	notRun := 0
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				switch e.Status {
				case results.StatusInterrupted:
					running = append(running, fmt.Sprintf("%s on gpu %s", m.Model, term.GPUList(e.GPUs)))
				case results.StatusNotRun:
					notRun++
				}
			}
		}
	}
	out := "nothing was running"
	if len(running) > 0 {
		out = "stopped while running " + strings.Join(running, ", ")
	}
	return out + fmt.Sprintf("; %d endpoint(s) not run", notRun)
}

// Describe is a one-paragraph summary of a finished run for the terminal: the status, then the GPUs
// counted by their judged verdict ("4 GPU(s): 3 ok, 1 failed").
func Describe(res *Result) string {
	s := res.Summary
	var sts []results.Status
	what := "GPU(s)"
	for _, h := range s.Hosts {
		for _, g := range h.GPUs {
			sts = append(sts, g.Status)
		}
	}
	if len(sts) == 0 { // no GPU of ours (an endpoint run): its endpoints
		what = "endpoint(s)"
		for _, h := range s.Hosts {
			for _, m := range h.Models {
				for _, e := range m.Endpoints {
					sts = append(sts, e.Status)
				}
			}
		}
	}
	n, count := len(sts), map[results.Status]int{}
	for _, st := range sts {
		count[st]++
	}
	var parts []string
	for _, st := range sts { // in the order each status first comes
		if c := count[st]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, st))
			count[st] = 0
		}
	}
	out := fmt.Sprintf("status %s: %d %s", s.Status, n, what)
	if sk := s.SkippedChecks(); s.Status == results.StatusOK && len(sk) > 0 {
		out = fmt.Sprintf("status ok, partial (%d check(s) skipped, see the caveats): %d %s", len(sk), n, what)
	}
	if len(parts) > 0 {
		out += ": " + strings.Join(parts, ", ")
	}
	if l := results.LayerLine(s.Layers); l != "" {
		out += "; by layer: " + l
	}
	if a := s.Action; a != "" && a != results.ActionNone {
		out += "; hardware action: " + results.ActionWords[a]
	}
	out += "; summary " + res.SummaryPath
	if _, err := os.Stat(filepath.Join(filepath.Dir(res.SummaryPath), "report.html")); err == nil {
		out += "; report " + filepath.Join(filepath.Dir(res.SummaryPath), "report.html")
	}
	return out
}
