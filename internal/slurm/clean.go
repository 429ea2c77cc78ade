package slurm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/fleet"
)

// Clean removes what a killed run left on the cluster, from its manifest m: each job it names is
// cancelled by its id (once Slurm confirms the job carries the run's name) and its partial results
// collected into the run's --out; a held job whose id was never recorded is found by its name;
// each node resumed to be vetted again gets gpuvet's drain back (unless someone drained it since);
// the run's reservation is deleted. Each object is marked in the manifest as it goes; the manifest
// goes when nothing is left. stateDir holds gpuvet's drain record.
func Clean(ctx context.Context, s Runner, m *fleet.Manifest, stateDir string, say func(string)) error {
	live := m.Live()
	order := map[string]int{KindJob: 0, KindSubmit: 0, KindResumed: 1, KindResv: 2}
	slices.SortStableFunc(live, func(a, b fleet.Object) int { return order[a.Kind] - order[b.Kind] })
	prefix := "gpuvet-" + m.RunID + "-"
	var errs []error
	for _, o := range live {
		var err error
		switch o.Kind {
		case KindJob:
			err = cleanJob(ctx, s, m, o, prefix, say)
		case KindSubmit:
			err = cleanSubmit(ctx, s, o, prefix, say)
		case KindResumed:
			err = cleanResumed(ctx, s, o, m, stateDir, say)
		case KindResv:
			if o.Name != "gpuvet-"+m.RunID {
				err = fmt.Errorf("reservation %q is not run %s's: left alone", o.Name, m.RunID)
			} else if err = DeleteReservation(ctx, s, o.Name); err == nil {
				say("deleted reservation " + o.Name)
			}
		default:
			err = fmt.Errorf("no cleaner for %s in this gpuvet", o)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("LEFT: %s: %w", o, err))
			continue
		}
		_ = m.Deleted(o)
	}
	errs = append(errs, m.Finish())
	return errors.Join(errs...)
}

// cleanJob cancels one recorded job, once Slurm says it is the run's (its name).
func cleanJob(ctx context.Context, s Runner, m *fleet.Manifest, o fleet.Object, prefix string, say func(string)) error {
	if !ValidJobID(o.Name) {
		return fmt.Errorf("job id %q: not a job id gpuvet submits, left alone", o.Name)
	}
	out, err := s.Run(ctx, "scontrol", "-o", "show", "job", o.Name)
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			return nil // gone
		}
		return err
	}
	f, err := jobFields(strings.TrimSpace(strings.SplitN(out, "\n", 2)[0]))
	if err != nil {
		return err
	}
	if !strings.HasPrefix(f["JobName"], prefix) {
		return fmt.Errorf("job %s is named %q, not %s…: not this run's, left alone", o.Name, f["JobName"], prefix)
	}
	j, _ := ParseJob(out)
	if !j.Final() {
		if err := Cancel(ctx, s, o.Name); err != nil {
			return err
		}
		say(fmt.Sprintf("cancelled job %s on %s", o.Name, o.Host))
	}
	if wd := f["WorkDir"]; wd != "" && o.LocalOut != "" {
		// Collect replaces local_out: only the run's own --out/hosts/NODE, never a folder an edited
		// manifest (or a relative path of a run started elsewhere) names.
		if why := ownLocalOut(o, m.Target["output"], m.RunID); why != "" {
			say(fmt.Sprintf("warning: %s: partial results not collected: %s", o, why))
		} else if _, err := Collect(filepath.Join(wd, "out"), o.LocalOut); err == nil {
			say(fmt.Sprintf("collected %s's partial results into %s", o.Host, o.LocalOut))
		}
	}
	return nil
}

// ownLocalOut is "" when o's local_out is the run's own --out/hosts/NODE, else why not.
func ownLocalOut(o fleet.Object, out, runID string) string {
	want := filepath.Join(out, fleet.HostsDir, fleet.Safe(o.Host))
	switch {
	case out == "" || !filepath.IsAbs(out):
		return "the manifest names no absolute --out of the run"
	case o.LocalOut != want:
		return fmt.Sprintf("local_out %s is not %s", fleet.Quote(o.LocalOut), want)
	case !fleet.OwnOut(out, runID):
		return fmt.Sprintf("%s holds no summary.json of run %s (not the run's own --out)", out, runID)
	}
	return ""
}

// cleanSubmit cancels the jobs of a submission whose id was never recorded, found by their name.
func cleanSubmit(ctx context.Context, s Runner, o fleet.Object, prefix string, say func(string)) error {
	if !strings.HasPrefix(o.Name, prefix) {
		return fmt.Errorf("job name %q does not carry the run (%s…): left alone", o.Name, prefix)
	}
	out, err := s.Run(ctx, "squeue", "-h", "--name="+o.Name, "-o", "%i %j")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(out, "\n") {
		id, name, _ := strings.Cut(strings.TrimSpace(l), " ")
		if name != o.Name || !ValidJobID(id) {
			continue
		}
		if err := Cancel(ctx, s, id); err != nil {
			return err
		}
		say(fmt.Sprintf("cancelled job %s (%s), never recorded by its run", id, name))
	}
	return nil
}

// cleanResumed puts gpuvet's drain back on a node the run resumed to vet again (no verdict came),
// with the reason of gpuvet's record, unless someone drained it since.
func cleanResumed(ctx context.Context, s Runner, o fleet.Object, m *fleet.Manifest, stateDir string, say func(string)) error {
	d, err := ReadDrains(stateDir)
	if err != nil {
		return err
	}
	rec, ok := d.Nodes[drainKey(m.Target["slurm_cluster"], o.Name)]
	if !ok {
		return nil // resumed by a later run, or forgotten: nothing of gpuvet's to put back
	}
	n, err := showNode(ctx, s, o.Name)
	if err != nil {
		return err
	}
	if n.Drained() {
		say(fmt.Sprintf("node %s: drained already (%q): left as it is", o.Name, n.Reason))
		return nil
	}
	if _, err := s.Run(ctx, "scontrol", "update", "nodename="+o.Name, "state=drain", "reason="+rec.Reason); err != nil {
		return err
	}
	say(fmt.Sprintf("node %s: gpuvet's drain put back (%s)", o.Name, rec.Reason))
	return nil
}
