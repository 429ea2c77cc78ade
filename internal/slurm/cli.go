// Package slurm is backend slurm: a Slurm cluster's GPU nodes vetted in place, one exclusive job
// per node running the host pipeline there (fleet.Execute runs it), failed nodes drained with a
// reason, and the modes Slurm operators use (docs/slurm.md). It speaks to the cluster through
// Slurm's own commands (sinfo, scontrol, sbatch, squeue, scancel), whose one-line key=value output
// has been stable for many releases; their --json output changes its schema with each release and
// scontrol of 22.05 has none.
package slurm

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/filelimit"
	"github.com/gpuvet/gpuvet/internal/fleet"
)

// Runner runs one Slurm command and returns its stdout; the error carries stderr.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) (string, error)
}

// Exec runs the commands found on PATH (SLURM_CONF and the rest of the environment as they are),
// each bounded by Timeout (default 60 s) and its output by maxOutput.
type Exec struct {
	Timeout time.Duration
	// Log, when set, gets every command line run (--dry-run shows them; tests read them).
	Log func(line string)
}

// maxOutput bounds what one command may print: scontrol's node list of a 10,000-node cluster is
// a few MB.
const maxOutput = 64 << 20

// Run runs name with args.
func (e Exec) Run(ctx context.Context, name string, args ...string) (string, error) {
	t := fleet.OrDefault(e.Timeout, 60*time.Second)
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	if e.Log != nil {
		e.Log(name + " " + strings.Join(args, " "))
	}
	cmd := exec.CommandContext(ctx, name, args...)
	// Bounded buffers that take every write (a short write would fail a command that succeeded).
	out, errb := &filelimit.Buffer{Limit: maxOutput}, &filelimit.Buffer{Limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, errb
	err := cmd.Run()
	if out.Over {
		return "", fmt.Errorf("%s: output over %d MB", name, maxOutput>>20)
	}
	if err != nil {
		msg := strings.TrimSpace(string(errb.Bytes()))
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			msg = fmt.Sprintf("no answer in %v (is slurmctld up?) %s", t, msg)
		}
		if msg == "" {
			msg = strings.TrimSpace(string(out.Bytes()))
		}
		if msg == "" { // it never ran (not installed), or said nothing
			return string(out.Bytes()), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		}
		return string(out.Bytes()), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return string(out.Bytes()), nil
}
