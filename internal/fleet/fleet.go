// Package fleet runs the one-host pipeline on many hosts: a backend (kubernetes, ssh, opennebula)
// provides each Host's Provision, Run and Cleanup; fleet bounds how many run at once, records a
// host that fails (with its phase and reason) without costing the others, merges the per-host
// summaries into one summary with hosts[], compares the hosts node to node with the GPU-to-GPU rule
// and guards, and keeps a run manifest (every object written before it is created) that
// `gpuvet clean` reads when a run was killed.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Host is one machine (a Kubernetes node, an SSH host, a VM) as a backend drives it.
type Host interface {
	// Name is the host's name as it appears in summary.json hosts[].name.
	Name() string
	// Provision makes the host ready to run the pipeline (copy or pull gpuvet, create objects).
	Provision(ctx context.Context) error
	// Run runs the pipeline on the host and returns its summary. A summary with an error is kept:
	// what the host measured before it broke is never lost.
	Run(ctx context.Context) (*results.Summary, error)
	// Cleanup removes what Provision and Run created. It runs whatever happened before, with its
	// own context (the run's may be cancelled).
	Cleanup(ctx context.Context) error
}

// Phases a host goes through; an Outcome's Phase names the one that failed (a cleanup's failure is
// its CleanErr).
const (
	PhaseProvision = "provision"
	PhaseRun       = "run"
)

// Outcome is what one host left: its summary (possibly partial), and the first error with its phase.
type Outcome struct {
	Host     string
	Summary  *results.Summary
	Err      error
	Phase    string // the phase that failed; "" when none did
	CleanErr error  // a cleanup failure, kept apart so it never hides the run's own error
	// ExpectGPUs is how many GPUs the host must show (what was passed through, what the plan
	// expects); a host that shows fewer fails. 0: no count.
	ExpectGPUs int
	// Interrupted is set when the run's context was cancelled before the host finished:
	// interrupted (it was running), not_run (it never started).
	Interrupted results.Status
}

// GPUCounter is a Host that knows how many GPUs it must show (a VM: the GPUs passed through).
type GPUCounter interface {
	ExpectGPUs() int
}

// Options bound and report a fleet run.
type Options struct {
	// Parallel is how many hosts run at once (--parallel-nodes); < 1 means 1.
	Parallel int
	// CleanupTimeout bounds each host's Cleanup (default 2 minutes).
	CleanupTimeout time.Duration
	// Progress receives one line per host step (nil: silent).
	Progress func(format string, args ...any)
	// ExpectGPUs is the plan's health.expect_gpus: every host must show at least that many
	// (a GPUCounter host's own count wins). 0: no count.
	ExpectGPUs int
}

// Run drives every host through Provision → Run → Cleanup (always, even when ctx is cancelled), at
// most opt.Parallel at a time, and returns one Outcome per host in order. A host that fails or
// panics is recorded; the others go on.
func Run(ctx context.Context, hosts []Host, opt Options) []Outcome {
	par := max(1, opt.Parallel)
	out := make([]Outcome, len(hosts))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i] = Outcome{Host: h.Name(), Phase: PhaseProvision, Err: fmt.Errorf("not started: %w", context.Cause(ctx)), Interrupted: results.StatusNotRun}
				return
			}
			defer func() { <-sem }()
			out[i] = runHost(ctx, h, opt)
		})
	}
	wg.Wait()
	return out
}

func runHost(ctx context.Context, h Host, opt Options) Outcome {
	o := Outcome{Host: h.Name(), ExpectGPUs: opt.ExpectGPUs}
	if gc, ok := h.(GPUCounter); ok && gc.ExpectGPUs() > 0 {
		o.ExpectGPUs = gc.ExpectGPUs()
	}
	say := func(format string, args ...any) {
		if opt.Progress != nil {
			opt.Progress("%s: %s", h.Name(), fmt.Sprintf(format, args...))
		}
	}
	say("provision")
	if err := protect(func() error { return h.Provision(ctx) }); err != nil {
		o.Phase, o.Err = PhaseProvision, err
	} else {
		say("run")
		err := protect(func() error {
			s, err := h.Run(ctx)
			o.Summary = s
			return err
		})
		if err != nil {
			o.Phase, o.Err = PhaseRun, err
		}
	}
	if ctx.Err() != nil {
		o.Interrupted = results.StatusInterrupted
	}
	if o.Err != nil {
		say("FAILED in %s: %v", o.Phase, o.Err)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), OrDefault(opt.CleanupTimeout, 2*time.Minute))
	defer cancel()
	switch err := protect(func() error { return h.Cleanup(cctx) }); {
	case errors.Is(err, ErrNothingMade):
		say("nothing to clean up: nothing was made there")
	case err != nil:
		o.CleanErr = err
		say("cleanup FAILED: %v", err)
	default:
		say("cleaned up")
	}
	return o
}

// OrDefault is d, or def when d is not positive (an unset timeout).
func OrDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// AbsPath is p made absolute (as it is when that fails): a manifest's local_out is read by a
// `gpuvet clean` started from any folder.
func AbsPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// ErrNothingMade is what a host's Cleanup returns when the run made nothing there (it never
// connected): "cleaned up" would claim work that was not done.
var ErrNothingMade = errors.New("nothing was made on the host")

// protect turns a panic into an error, so one broken host never ends the fleet run.
func protect(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			st := strings.SplitN(string(debug.Stack()), "\n", 13)
			err = fmt.Errorf("panic: %v\n%s", p, strings.Join(st[:min(12, len(st))], "\n"))
		}
	}()
	return fn()
}

// ShellRunner runs one POSIX shell script on a host (the ssh backend's connection, a test's chroot)
// and returns its stdout; the error carries the exit status and stderr.
type ShellRunner interface {
	Run(ctx context.Context, script string) (string, error)
}

// ShellQuote makes s one word for a POSIX shell.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// ShellWords quotes each word for a POSIX shell, joined by spaces.
func ShellWords(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = ShellQuote(w)
	}
	return strings.Join(q, " ")
}

// Recorder keeps a run's manifest (*Manifest): an object is recorded before it is made or changed,
// and marked deleted once undone.
type Recorder interface {
	Record(Object) error
	Deleted(Object) error
}

// RecordOn appends to objs the object kind/name on base's host (base as clean reconnects to it,
// without its run folder's local_out and known_hosts), recorded in rec first (nil: none); an
// error says what it left undone ("nothing released").
func RecordOn(rec Recorder, objs *[]Object, base Object, kind, name, undone string) error {
	o := base
	o.Kind, o.Name, o.LocalOut, o.KnownHosts = kind, name, "", ""
	if rec != nil {
		if err := rec.Record(o); err != nil {
			return fmt.Errorf("run manifest: %w (%s)", err, undone)
		}
	}
	*objs = append(*objs, o)
	return nil
}

// MarkDone marks the objects of objs that done holds deleted in rec (nil: none) and returns the
// others, left to undo.
func MarkDone(rec Recorder, objs, done []Object) (left []Object) {
	for _, o := range objs {
		if !slices.ContainsFunc(done, o.Same) {
			left = append(left, o)
		} else if rec != nil {
			_ = rec.Deleted(o)
		}
	}
	return left
}

// RecordLine is o as a host's own record of a run lists it: "KIND NAME". The record is written
// with these lines and read back against them, so this is the one place their form is spelled.
func (o Object) RecordLine() string { return o.Kind + " " + o.Name }

// RecordLines are objs' RecordLine each.
func RecordLines(objs []Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.RecordLine()
	}
	return out
}
