package slurm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Host is one node of the run (fleet.Host): Provision writes the job's plan and script to the
// shared folder and submits the job held, recorded before and after, then releases it; Run waits
// and collects the node's results; Cleanup cancels a job not ended (scancel by its id) and waits.
type Host struct {
	node        Node
	f           *Fleet
	bin         string
	dir         string // the node's folder on the shared file system
	localOut    string // --out/hosts/NODE
	reservation string // the run's reservation, for a node gpuvet drained before

	jobID    string
	job      fleet.Object
	released time.Time
	ended    bool
	follow   follower // the job's output, streamed as the node's progress
}

// Name is the node's name.
func (h *Host) Name() string { return h.node.Name }

// ExpectGPUs is the node's gres gpu count, which its run must show (fleet.GPUCounter).
func (h *Host) ExpectGPUs() int { return h.node.GPUs }

// JobName names a node's job: the run and the node, so `gpuvet clean` can find a job whose id
// the run never recorded (killed between sbatch and the record), and never another's.
func JobName(runID, node string) string { return "gpuvet-" + runID + "-" + fleet.Safe(node) }

// script is the job: the host pipeline on the node, its results into out/ beside it.
func (h *Host) script() string {
	c := h.f.Config
	args := []string{quote(h.bin), "run", "-c", quote(filepath.Join(h.dir, "plan.yaml")), "--out", quote(filepath.Join(h.dir, "out")),
		"--backend", quote(c.RemoteBackend),
		// The fleet run keeps the history (fleet.Execute records the merged summary): a node's own
		// run recording it too would count every node twice.
		"--set", "history.enabled=false"}
	if backendkind.Of(c.RemoteBackend).Simulated && strings.HasPrefix(h.f.Plan.Source("sim.gpus"), "default") {
		// The simulator stands in for the node's GPUs: as many as its gres says.
		args = append(args, "--sim-gpus", strconv.Itoa(h.node.GPUs))
	}
	for _, kv := range c.NodeSet[h.node.Name] {
		args = append(args, "--set", quote(kv))
	}
	return "#!/bin/sh\n# gpuvet run " + h.f.run.ID + " on node " + h.node.Name + " (slurm job: gpuvet's host pipeline)\n" +
		"echo \"gpuvet: job $SLURM_JOB_ID on $(hostname), GPUs ${CUDA_VISIBLE_DEVICES:-none}\"\n" +
		"exec " + strings.Join(args, " ") + "\n"
}

// minutes is d in Slurm's whole minutes, rounded up (at least 1): a job never gets less than asked.
func minutes(d time.Duration) int { return max(1, int((d+time.Minute-1)/time.Minute)) }

var quote = fleet.ShellQuote

// Provision writes the node's folder and submits its job: held, its id recorded, then released.
func (h *Host) Provision(ctx context.Context) error {
	c := h.f.Config
	if err := os.Mkdir(h.dir, 0o755); err != nil {
		return fmt.Errorf("the node's folder on the shared file system: %w", err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "plan.yaml"), h.f.run.Plan, 0o600); err != nil {
		return err
	}
	script := filepath.Join(h.dir, "job.sh")
	if err := os.WriteFile(script, []byte(h.script()), 0o700); err != nil {
		return err
	}
	name := JobName(h.f.run.ID, h.node.Name)
	args := []string{"--parsable", "--hold", "--job-name=" + name, "--nodelist=" + h.node.Name, "--nodes=1", "--ntasks=1",
		"--exclusive", "--gres=gpu:" + strconv.Itoa(h.node.GPUs), "--time=" + strconv.Itoa(minutes(c.TimeLimit.D())),
		"--chdir=" + h.dir, "--output=" + filepath.Join(h.dir, "slurm-%j.out"), "--no-requeue"}
	for _, opt := range [][2]string{{"--partition=", c.Partition}, {"--reservation=", cmp.Or(h.reservation, c.Reservation)}, {"--account=", c.Account}, {"--qos=", c.QOS}} {
		if opt[1] != "" {
			args = append(args, opt[0]+opt[1])
		}
	}
	m := h.f.run.Manifest
	submit := fleet.Object{Kind: KindSubmit, Name: name, Host: h.node.Name}
	if err := m.Record(submit); err != nil {
		return fmt.Errorf("run manifest: %w (nothing submitted)", err)
	}
	out, err := h.f.Slurm.Run(ctx, "sbatch", append(args, script)...)
	if err != nil {
		_ = m.Deleted(submit)
		return fmt.Errorf("sbatch: %w", err)
	}
	id, err := ParseJobID(out)
	if err != nil {
		return err // the submit object stays: clean finds the job by its name
	}
	h.jobID = id
	h.job = fleet.Object{Kind: KindJob, Name: id, Host: h.node.Name, LocalOut: h.localOut, On: name}
	if err := m.Record(h.job); err != nil {
		return fmt.Errorf("run manifest: %w (job %s stays held; `gpuvet clean` cancels it by its name %s)", err, id, name)
	}
	_ = m.Deleted(submit)
	if _, err := h.f.Slurm.Run(ctx, "scontrol", "release", id); err != nil {
		return fmt.Errorf("releasing job %s: %w", id, err)
	}
	h.released = time.Now()
	h.f.say(fmt.Sprintf("%s: job %s submitted (exclusive, gpu:%d, %v)", h.node.Name, id, h.node.GPUs, c.TimeLimit.D()))
	return nil
}

// Run waits for the node's job to end and returns the node's summary (partial when the job died:
// kept, but never a pass).
func (h *Host) Run(ctx context.Context) (*results.Summary, error) {
	j, err := h.wait(ctx)
	h.follow.rest(filepath.Join(h.dir, "slurm-"+h.jobID+".out"), func(l string) { h.f.say("[" + h.node.Name + "] " + l) })
	s, cerr := Collect(filepath.Join(h.dir, "out"), h.localOut)
	if err != nil {
		return s, err
	}
	h.ended = true
	tail := lastLines(filepath.Join(h.dir, "slurm-"+h.jobID+".out"), 5)
	switch {
	case j.State == "PREEMPTED" || j.State == "CANCELLED":
		// Not gpuvet's doing (its own scancel comes with the run's end) nor the node's: someone, or
		// Slurm for higher-priority work, stopped the job. Not evidence about a GPU: inconclusive.
		what := fmt.Sprintf("job %s %s on %s by Slurm or someone else before gpuvet finished there", j.ID, strings.ToLower(j.State), h.node.Name)
		return s, &disrupted{msg: fmt.Sprintf("%s%s; last output: %s", what, partial(s), tail), what: what}
	case j.State != "COMPLETED" && j.State != "FAILED":
		return s, fmt.Errorf("job %s ended %s on %s (exit %d, signal %d) before gpuvet finished there%s; last output: %s", j.ID, j.State, h.node.Name, j.ExitCode, j.Signal, partial(s), tail)
	case s == nil && j.ExitCode == 127:
		return nil, fmt.Errorf("job %s on %s: gpuvet not found there at %s (exit 127): install it at that path on every node, or on a shared file system, and name it with slurm.binary; last output: %s", j.ID, h.node.Name, h.bin, tail)
	case s == nil && tail == noOutput:
		return nil, fmt.Errorf("job %s (%s, exit %d) wrote nothing here: is %s visible at the same path on %s (slurm.shared_dir), and gpuvet at %s (slurm.binary)?", j.ID, j.State, j.ExitCode, h.dir, h.node.Name, h.bin)
	case s == nil:
		return nil, fmt.Errorf("job %s (%s, exit %d) left no summary in %s (%w); last output: %s", j.ID, j.State, j.ExitCode, filepath.Join(h.dir, "out"), cerr, tail)
	case j.ExitCode > 1 || j.Signal != 0:
		// gpuvet exits 0 or 1 once it has judged: anything else is a run that died.
		return s, fmt.Errorf("gpuvet died in job %s (exit %d, signal %d)%s; last output: %s", j.ID, j.ExitCode, j.Signal, partial(s), tail)
	case !s.Complete:
		return s, fmt.Errorf("job %s: the node's summary says complete: false (the run did not finish)%s; last output: %s", j.ID, partial(s), tail)
	}
	return s, nil
}

func partial(s *results.Summary) string {
	if s == nil {
		return ""
	}
	return "; its partial results are kept"
}

// maxPollFailures is how many reads of a job's state in a row may fail (slurmctld restarting
// takes a few seconds) before the node fails.
const maxPollFailures = 10

// wait polls the job until it ends (or ctx ends: the job is then cancelled by Cleanup). A job
// still pending after slurm.queue_timeout is cancelled.
func (h *Host) wait(ctx context.Context) (Job, error) {
	c := h.f.Config
	var last string
	failures := 0
	t := time.NewTicker(c.Poll.D())
	defer t.Stop()
	for {
		j, gone, err := ShowJob(ctx, h.f.Slurm, h.jobID)
		if err == nil {
			failures = 0
		}
		switch {
		case ctx.Err() != nil:
			return j, context.Cause(ctx)
		case gone:
			return Job{ID: h.jobID, State: "COMPLETED"}, nil // purged (MinJobAge): its results say how it went
		case err != nil && failures < maxPollFailures:
			// slurmctld busy or restarting: the job goes on without it; ask again.
			failures++
			h.f.say(fmt.Sprintf("%s: job %s: %v (asking again)", h.node.Name, h.jobID, err))
		case err != nil:
			return j, fmt.Errorf("job %s: %d reads of its state failed in a row: %w", h.jobID, failures+1, err)
		case j.Final():
			return j, nil
		}
		h.follow.lines(filepath.Join(h.dir, "slurm-"+h.jobID+".out"), func(l string) { h.f.say("[" + h.node.Name + "] " + l) })
		if err == nil && j.State != last {
			last = j.State
			h.f.say(fmt.Sprintf("%s: job %s %s%s", h.node.Name, j.ID, strings.ToLower(j.State), pendingWhy(j)))
		}
		if err == nil && j.State == "PENDING" && time.Since(h.released) > c.QueueTimeout.D() {
			return j, fmt.Errorf("job %s did not start within slurm.queue_timeout %v (%s): the node stayed busy or unavailable; cancelled", j.ID, c.QueueTimeout.D(), j.Reason)
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

func pendingWhy(j Job) string {
	if j.State == "PENDING" && j.Reason != "" && j.Reason != "None" {
		return " (" + j.Reason + ")"
	}
	return ""
}

// ShowJob reads one job; gone is true when Slurm no longer knows it.
func ShowJob(ctx context.Context, s Runner, id string) (Job, bool, error) {
	out, err := s.Run(ctx, "scontrol", "-o", "show", "job", id)
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			return Job{}, true, nil
		}
		return Job{}, false, err
	}
	j, err := ParseJob(out)
	return j, false, err
}

// Collect moves a node's output folder src to dst (--out/hosts/NODE; copied when it is on another
// file system) and reads its summary.json.
func Collect(src, dst string) (*results.Summary, error) {
	if _, err := os.Stat(src); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dst); err != nil {
		return nil, err
	}
	if err := os.Rename(src, dst); err != nil {
		if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
			return nil, err
		}
	}
	return results.Read(filepath.Join(dst, "summary.json"))
}

const noOutput = "(no job output)"

// lastLines is the last n lines of a file (its last 64 KiB), for a failure's reason.
func lastLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return noOutput
	}
	defer f.Close()
	st, _ := f.Stat()
	off := max(0, st.Size()-64<<10)
	b := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(b, off)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// Cleanup cancels the node's job when it has not ended (an interrupt, an error), waits until
// Slurm says it has, and marks it in the manifest.
func (h *Host) Cleanup(ctx context.Context) error {
	if h.jobID == "" {
		return nil
	}
	if !h.ended {
		if err := Cancel(ctx, h.f.Slurm, h.jobID); err != nil {
			return err
		}
		if s, err := Collect(filepath.Join(h.dir, "out"), h.localOut); err == nil && s != nil {
			h.f.say(fmt.Sprintf("%s: job %s cancelled; its partial results are in %s", h.node.Name, h.jobID, h.localOut))
		}
	}
	return h.f.run.Manifest.Deleted(h.job)
}

// Cancel cancels job id (scancel by its id, nothing else) and waits until it has ended.
func Cancel(ctx context.Context, s Runner, id string) error {
	if !ValidJobID(id) {
		return fmt.Errorf("job id %q: not a job id gpuvet submits, left alone", id)
	}
	if _, err := s.Run(ctx, "scancel", id); err != nil && !strings.Contains(err.Error(), "Invalid job id") {
		return fmt.Errorf("scancel %s: %w", id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cancelWait)
	defer cancel()
	for {
		j, gone, err := ShowJob(ctx, s, id)
		if gone || (err == nil && j.Final()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s: still %s after scancel: %w", id, j.State, errors.Join(err, ctx.Err()))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// cancelWait bounds Cancel's wait for a cancelled job to end: a job stuck COMPLETING on a node that
// stopped answering must not hold `gpuvet clean` (no deadline of its own) forever.
var cancelWait = 5 * time.Minute

// follower reads what a job wrote to its output file since the last read: the node's own
// progress, as an ssh host's streams back. At most maxFollow bytes a read; a line longer than that
// is cut.
type follower struct {
	off     int64
	partial string
}

const maxFollow = 64 << 10

func (f *follower) lines(path string, say func(string)) {
	fh, err := os.Open(path)
	if err != nil {
		return
	}
	defer fh.Close()
	b := make([]byte, maxFollow)
	n, _ := fh.ReadAt(b, f.off)
	if n == 0 {
		return
	}
	f.off += int64(n)
	text := f.partial + string(b[:n])
	parts := strings.Split(text, "\n")
	f.partial = parts[len(parts)-1]
	if len(f.partial) > maxFollow {
		say(f.partial[:200] + " …")
		f.partial = ""
	}
	for _, l := range parts[:len(parts)-1] {
		if l = strings.TrimRight(l, "\r"); l != "" {
			say(l)
		}
	}
}

// rest follows the output to its end (the job has ended: nothing more comes), at most maxRest
// reads: a job that wrote more than one read's worth since the last poll keeps its last lines.
func (f *follower) rest(path string, say func(string)) {
	for range maxRest {
		off := f.off
		f.lines(path, say)
		if f.off == off {
			return
		}
	}
}

// maxRest bounds rest: 256 reads of maxFollow, 16 MiB of a job's output.
const maxRest = 256

// disrupted is a node's job stopped from outside (results.Disrupted): the node is inconclusive.
type disrupted struct{ msg, what string }

func (e *disrupted) Error() string      { return e.msg }
func (e *disrupted) Disruption() string { return e.what }
