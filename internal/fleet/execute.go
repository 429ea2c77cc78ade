package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/history"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/report"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Backend is what a fleet backend (ssh, opennebula, kubernetes, slurm) gives Execute: the hosts of
// one run; Execute owns the rest (run id, manifest, the bounded parallel run, merge, judging,
// outputs, exit status). Nested runs one inside another run (opennebula's bare-metal nodes).
type Backend interface {
	// Hosts lists the run's hosts (nothing created yet) and the ones left out, with their reasons.
	// An error is bad input (exit 2): nothing was created. A backend may set the manifest's target
	// here (where its objects live).
	Hosts(ctx context.Context, r RunInfo) ([]Host, []results.SkippedHost, error)
	// Parallel is how many hosts run at once.
	Parallel() int
	// CleanupTimeout bounds one host's Cleanup (the backend knows how long its objects take to go).
	CleanupTimeout() time.Duration
	// Finish adds the backend's own records to the merged summary (VMs), before it is judged.
	Finish(s *results.Summary)
}

// Closer is a Backend with run-wide objects of its own (a Kubernetes run's namespace): Close runs
// once every host's Cleanup is done, whatever happened, before merging; its error is something
// left behind (a LEFTOVERS caveat).
type Closer interface {
	Close(ctx context.Context, outs []Outcome) error
}

// Verdicter is a Backend that writes the verdicts back where its hosts live (kubernetes' labels and
// taints, slurm's drains): ApplyVerdicts runs once the merged summary is judged, before it is
// written, unless the run was interrupted. Its error is a caveat and fails the run (exit 1).
type Verdicter interface {
	ApplyVerdicts(ctx context.Context, s *results.Summary) error
}

// RunInfo is what every host of a run shares.
type RunInfo struct {
	ID       string // unique: NewRunID
	Out      string // the local output folder; each host's own results go under Out/hosts/
	Plan     []byte // the plan as YAML for the hosts' own runs (config.Plan.RemoteYAML)
	Manifest *Manifest
	Say      func(line string) // progress, one line
	// ToolVersion is gpuvet's version, recorded in every summary of the run.
	ToolVersion string
}

// Log says line on r.Say, when the run has one.
func (r RunInfo) Log(line string) {
	if r.Say != nil {
		r.Say(line)
	}
}

// ExecOptions are the process-wide things Execute needs from its caller.
type ExecOptions struct {
	Stdout, Stderr io.Writer
	ToolVersion    string
}

// InputError is bad input found before anything was created (the CLI's exit 2).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// ErrInterrupted is the error of a run stopped by Ctrl-C or SIGTERM (partial results kept).
var ErrInterrupted = errors.New("interrupted")

// Execute runs one fleet run: hosts (or VMs) in parallel, one merged, judged summary and its
// reports. The error is an *InputError (nothing started), ErrInterrupted (wrapped), or a failed run.
func Execute(ctx context.Context, plan *config.Plan, b Backend, o ExecOptions) error {
	c := plan.Config
	start := time.Now().UTC()
	runID := results.NewRunID(start)
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(o.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), line)
	}
	yml, err := plan.RemoteYAML()
	if err != nil {
		return &InputError{fmt.Errorf("plan: %w", err)}
	}
	if err := os.MkdirAll(c.Output.Dir, 0o755); err != nil {
		return &InputError{fmt.Errorf("output.dir %s: %w", c.Output.Dir, err)}
	}
	state, err := StateDir()
	if err != nil {
		return &InputError{err}
	}
	out, err := filepath.Abs(c.Output.Dir)
	if err != nil {
		return &InputError{err}
	}
	m, err := NewManifest(state, c.Backend, runID, map[string]string{"output": out})
	if err != nil {
		return &InputError{err}
	}
	r := RunInfo{ID: runID, Out: c.Output.Dir, Plan: yml, Manifest: m, Say: say, ToolVersion: o.ToolVersion}
	hist := &history.Session{} // the store, opened once: read before the judge, written after it
	defer hist.Close()
	s, outs, err := run(ctx, plan, b, r, start, stages{
		started: func(hosts, parallel int) error {
			// Until the run ends, summary.json says it has not: a controller killed with kill -9
			// leaves a summary that never reads as ok.
			started := base(plan, runID, start, o.ToolVersion)
			started.Status = results.StatusIncomplete
			// The advice names the run, not a file: this summary is never a manifest (clean refuses it).
			started.Error = fmt.Sprintf("the fleet run has not finished (if it was killed: `gpuvet clean --run %s` collects each host's partial results into %s; its manifest is %s)",
				runID, filepath.Join(c.Output.Dir, "hosts"), m.Path())
			if err := results.WriteJSON(filepath.Join(c.Output.Dir, "summary.json"), started); err != nil {
				return &InputError{fmt.Errorf("output.dir %s: %w", c.Output.Dir, err)}
			}
			say(fmt.Sprintf("run %s: backend %s, %d host(s), %d at once, manifest %s", runID, c.Backend, hosts, parallel, m.Path()))
			return nil
		},
		// Each node against its own acceptance run: read before judging, recorded once judged.
		judging: func(s *results.Summary) { hist.Prepare(ctx, s, plan) },
		warn:    func(msg string) { fmt.Fprintln(o.Stderr, "gpuvet: WARNING: "+msg) },
	})
	if err != nil {
		_ = m.Finish()
		return err
	}
	return finish(ctx, plan, b, s, m, outs, o, hist)
}

// Nested runs a fleet inside another run (opennebula's bare-metal re-measure before any VM): the
// core of Execute (run) under the outer run's id and manifest (r), its judged summary written to
// r.Out/summary.json. The outer run owns the rest (manifest, history, verdicts, exit status). The
// error is an *InputError (nothing started), or the summary not written (it is returned anyway).
func Nested(ctx context.Context, plan *config.Plan, b Backend, r RunInfo) (*results.Summary, []Outcome, error) {
	if err := os.MkdirAll(r.Out, 0o755); err != nil {
		return nil, nil, &InputError{fmt.Errorf("%s: %w", r.Out, err)}
	}
	s, outs, err := run(ctx, plan, b, r, time.Now().UTC(), stages{
		started: func(hosts, parallel int) error {
			r.Log(fmt.Sprintf("%d host(s), %d at once, results in %s", hosts, parallel, r.Out))
			return nil
		},
		warn: func(msg string) { r.Log("WARNING: " + msg) },
	})
	if err != nil {
		return nil, nil, err
	}
	interrupted := ctx.Err() != nil
	if interrupted {
		markInterrupted(s, outs)
	}
	s.FinishedAt = time.Now().UTC()
	s.Complete = !interrupted
	s.Outputs = results.OutputFiles(r.Out, s.StartedAt)
	if err := results.WriteJSON(filepath.Join(r.Out, "summary.json"), s); err != nil {
		return s, outs, fmt.Errorf("write %s: %w", filepath.Join(r.Out, "summary.json"), err)
	}
	return s, outs, nil
}

// Succeeded is s narrowed (report.HostsOnly) to the hosts whose own run finished without an error:
// what a nested run's caller may take as figures (opennebula's bare-metal baseline); nil if none.
func Succeeded(s *results.Summary, outs []Outcome) *results.Summary {
	var names []string
	for _, h := range s.Hosts {
		for _, o := range outs {
			if o.Err == nil && o.Summary != nil && (h.Name == o.Host || strings.HasPrefix(h.Name, o.Host+"/")) {
				names = append(names, h.Name)
				break
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	ok, _ := report.HostsOnly(s, names) // no error: every name is one of s's hosts
	return ok
}

// stages are where Execute and Nested differ inside run (nil: nothing).
type stages struct {
	// started runs once the hosts are known, before any runs (the skipped ones are said after
	// it); its error (an *InputError) ends the run before anything was created.
	started func(hosts, parallel int) error
	// judging runs on the merged summary just before it is judged.
	judging func(s *results.Summary)
	// warn says one thing left behind (a Closer's error).
	warn func(msg string)
}

// run is the core of Execute and Nested: the backend's hosts, the bounded parallel run, Close,
// the merge, the backend's Finish, and judging node to node. Its error is an *InputError.
func run(ctx context.Context, plan *config.Plan, b Backend, r RunInfo, start time.Time, st stages) (*results.Summary, []Outcome, error) {
	hosts, skipped, err := b.Hosts(ctx, r)
	if err != nil {
		return nil, nil, &InputError{err}
	}
	parallel := b.Parallel()
	if st.started != nil {
		if err := st.started(len(hosts), parallel); err != nil {
			return nil, nil, err
		}
	}
	for _, sk := range skipped {
		r.Log(fmt.Sprintf("skipped %s: %s", sk.Name, sk.Reason))
	}
	outs := Run(ctx, hosts, Options{Parallel: parallel, CleanupTimeout: b.CleanupTimeout(), ExpectGPUs: plan.Config.Health.ExpectGPUs,
		Progress: func(f string, a ...any) { r.Log(fmt.Sprintf(f, a...)) }})
	var closeErr error
	if cl, ok := b.(Closer); ok {
		closeErr = cl.Close(ctx, outs)
	}
	s := Merge(base(plan, r.ID, start, r.ToolVersion), outs, skipped, parallel)
	if closeErr != nil {
		s.Caveats = append(s.Caveats, "LEFTOVERS: "+closeErr.Error())
		if st.warn != nil {
			st.warn(closeErr.Error())
		}
	}
	b.Finish(s)
	if st.judging != nil {
		st.judging(s)
	}
	if err := judge.Fleet(s, plan); err != nil {
		s.Error = results.JoinErr(s.Error, "judge: "+err.Error())
		s.Status = results.StatusFailed
	}
	return s, outs, nil
}

// base is the merged summary's identity (pipeline.NewSummary). With parallel_gpus auto each host
// chooses its own (hosts[].parallel), and the merge takes the most any host loaded.
func base(plan *config.Plan, runID string, start time.Time, version string) *results.Summary {
	s := pipeline.NewSummary(plan, runID, start, version)
	s.Status = results.StatusOK
	s.Meta.ParallelGPUs, s.Meta.Engine = 0, plan.Config.Engine.Kind
	if n := plan.Config.Run.ParallelGPUs; !n.Auto() {
		s.Meta.ParallelGPUs = max(1, int(n))
	}
	return s
}

// finish judges the merged summary against a baseline, writes it and the reports, closes the
// manifest (loudly when something is left) and returns the run's error.
func finish(ctx context.Context, plan *config.Plan, b Backend, s *results.Summary, m *Manifest, outs []Outcome, o ExecOptions, hist *history.Session) error {
	c := plan.Config
	if c.Run.Baseline != "" {
		_ = pipeline.BaselineFromFile(s, c.Run.Baseline, plan)
	}
	interrupted := ctx.Err() != nil
	var actErr error
	if v, ok := b.(Verdicter); ok && !interrupted {
		if actErr = v.ApplyVerdicts(ctx, s); actErr != nil {
			s.Caveats = append(s.Caveats, "VERDICTS NOT WRITTEN: "+actErr.Error())
			fmt.Fprintln(o.Stderr, "gpuvet: WARNING: "+actErr.Error())
		}
	}
	if interrupted {
		markInterrupted(s, outs)
		// The manifest stays: `gpuvet clean --manifest` confirms nothing is left (or removes it).
		if err := m.Keep(); err != nil {
			fmt.Fprintln(o.Stderr, "gpuvet: WARNING: run manifest:", err)
		}
		if live := m.Live(); len(live) > 0 {
			s.Caveats = append(s.Caveats, fmt.Sprintf("LEFTOVERS: %d object(s) left (first: %s): run `gpuvet clean --manifest %s`", len(live), live[0], m.Path()))
		}
	} else if err := m.Finish(); err != nil {
		s.Caveats = append(s.Caveats, "LEFTOVERS: "+err.Error())
		fmt.Fprintln(o.Stderr, "gpuvet: WARNING: "+err.Error())
	}
	s.FinishedAt = time.Now().UTC()
	s.Complete = !interrupted
	hist.Record(ctx, s, plan) // and closes the store Prepare opened
	path := filepath.Join(c.Output.Dir, "summary.json")
	if _, err := WriteSummary(c.Output.Dir, s, o.Stderr); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if c.Run.SaveBaseline && s.Complete {
		if err := WriteBaseline(c.Output.Dir, s); err != nil {
			fmt.Fprintln(o.Stderr, "gpuvet: WARNING: baseline.json not written:", err)
		}
	}
	if err := pipeline.WriteReports(s, c.Output.Dir, c.Output); err != nil {
		fmt.Fprintln(o.Stderr, "gpuvet: report:", err)
	}
	Render(o.Stdout, s)
	fmt.Fprintf(o.Stdout, "\nstatus %s: %d host(s); summary %s\n", s.Status, len(s.Hosts), path)
	if interrupted {
		return fmt.Errorf("%w: partial results in %s; manifest %s", ErrInterrupted, path, m.Path())
	}
	if actErr != nil {
		return fmt.Errorf("run status %s, but its verdicts were not all written: %w (see %s)", s.Status, actErr, path)
	}
	if code := exitCode(s, c.Run); code != 0 {
		return &StatusError{Status: s.Status, Code: code, Path: path}
	}
	return nil
}

// exitCode is the run's exit code: the acceptance mode's contract, or the default one with
// run.fail_on_flag and run.fail_on_inconclusive.
func exitCode(s *results.Summary, r config.Run) int {
	if r.Acceptance {
		return judge.AcceptanceExitCode(s)
	}
	return judge.ExitCode(s, r.FailOnFlag, r.FailOnInconclusive)
}

// StatusError is a finished run whose judged status makes it exit non-zero; Code is the exit
// code (judge.ExitCode, or judge.AcceptanceExitCode under run.acceptance).
type StatusError struct {
	Status results.Status
	Code   int
	Path   string // summary.json
}

func (e *StatusError) Error() string {
	if e.Code == judge.ExitUndecided {
		return fmt.Sprintf("run status %s: undecided, not accepted (see %s for what would decide it)", e.Status, e.Path)
	}
	return fmt.Sprintf("run status %s (see %s)", e.Status, e.Path)
}

// markInterrupted sets the run, and every host the interrupt cut short, interrupted (never
// started: not_run): an interrupt is not the host's failure. A host that had finished, or failed
// on its own, keeps its status.
func markInterrupted(s *results.Summary, outs []Outcome) {
	for _, o := range outs {
		if o.Interrupted == "" {
			continue
		}
		for i := range s.Hosts {
			h := &s.Hosts[i]
			// A host's summary with several hosts is HOST/NAME; per-GPU VMs HOST/gpuN fold into HOST.
			if h.Name == o.Host || strings.HasPrefix(h.Name, o.Host+"/") || strings.HasPrefix(o.Host, h.Name+"/") {
				h.Status = o.Interrupted
			}
		}
	}
	s.Error = results.JoinErr(s.Error, "interrupted: results are partial")
	s.Status = results.StatusInterrupted
}
