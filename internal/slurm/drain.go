package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpuvet/gpuvet/internal/filelimit"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// ReasonPrefix starts every drain reason gpuvet writes ("gpuvet RUN: failed: …"). A node is
// gpuvet's to resume only when its reason still starts so AND gpuvet's record of its drains
// names the node with that very reason: a node someone drained again after gpuvet, with a reason
// of their own, is theirs.
const ReasonPrefix = "gpuvet "

// maxReason bounds a drain reason: scontrol shows it on one line (Slurm keeps any length, people
// read the first hundred characters).
const maxReason = 256

// Drain is one node gpuvet drained: the run, the reason it wrote, when.
type Drain struct {
	RunID  string    `json:"run_id"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Drains is gpuvet's record of the nodes it drained, by cluster and node (drainKey). It outlives
// runs (a drain is meant to: the node stays out until a later ok run resumes it), so it is not in
// a run's manifest but beside them: StateDir/slurm/drained.json.
type Drains struct {
	path  string
	Nodes map[string]Drain `json:"nodes"`
}

func drainKey(cluster, node string) string { return cluster + "/" + node }

// DrainsPath is the record's file under the state directory (a folder of its own: the state
// directory's *.json are run manifests).
func DrainsPath(stateDir string) string { return filepath.Join(stateDir, "slurm", "drained.json") }

// ReadDrains reads the record (none yet: empty).
func ReadDrains(stateDir string) (*Drains, error) {
	d := &Drains{path: DrainsPath(stateDir), Nodes: map[string]Drain{}}
	b, err := filelimit.Read(d.path, filelimit.Config, "gpuvet's record of drained nodes")
	if errors.Is(err, os.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("%s: %v (gpuvet's record of the nodes it drained; move it away to start a new one: gpuvet then resumes none of the nodes it drained before)", d.path, err)
	}
	if d.Nodes == nil {
		d.Nodes = map[string]Drain{}
	}
	return d, nil
}

// Save writes the record.
func (d *Drains) Save() error {
	if err := os.MkdirAll(filepath.Dir(d.path), 0o755); err != nil {
		return err
	}
	return results.WriteJSON(d.path, d)
}

// Ours reports whether node n is drained by gpuvet: the record names it with the reason the
// node carries now.
func (d *Drains) Ours(cluster string, n Node) bool {
	r, ok := d.Nodes[drainKey(cluster, n.Name)]
	return ok && n.Drained() && strings.HasPrefix(n.Reason, ReasonPrefix) && r.Reason == n.Reason
}

// Reason is the drain reason of a judged node: the run, its status and why, on one line.
func Reason(runID string, st results.Status, why string) string {
	r := fmt.Sprintf("%s%s: %s: %s", ReasonPrefix, runID, st, strings.Join(strings.Fields(why), " "))
	if len(r) > maxReason {
		r = r[:maxReason-len("…")]
		for !utf8.ValidString(r) {
			r = r[:len(r)-1]
		}
		r += "…"
	}
	return r
}

// drain drains node with reason (scontrol update state=drain), recording it first.
func (f *Fleet) drain(ctx context.Context, node, reason string) error {
	d, err := ReadDrains(f.StateDir)
	if err != nil {
		return err
	}
	d.Nodes[drainKey(f.cluster, node)] = Drain{RunID: f.run.ID, Reason: reason, At: time.Now().UTC()}
	if err := d.Save(); err != nil {
		return fmt.Errorf("recording the drain first: %v (node not drained)", err)
	}
	_, err = f.Slurm.Run(ctx, "scontrol", "update", "nodename="+node, "state=drain", "reason="+reason)
	return err
}

// drains tells whether a node of status st is drained.
func (f *Fleet) drains(st results.Status) bool {
	c := f.Config
	return ((c.DrainFailed || c.DrainFlagged) && st == results.StatusFailed) || (c.DrainFlagged && st == results.StatusFlag)
}

// ApplyVerdicts acts on the judged nodes (fleet.Verdicter): with slurm.drain_failed (and
// drain_flagged) a failed (flagged) node is drained with its reason; a node gpuvet drained before
// and vetted again is resumed when it is ok now, drained again otherwise. At most slurm.max_drain
// nodes are drained by one run: more is refused whole and said. A node someone else drained
// meanwhile is left alone. slurm.dry_run says each action and takes none.
func (f *Fleet) ApplyVerdicts(ctx context.Context, s *results.Summary) error {
	c := f.Config
	ok := map[string]bool{}
	var toDrain []results.Host
	for _, h := range s.Hosts {
		if !f.vetted[h.Name] {
			continue
		}
		if h.Status == results.StatusOK {
			ok[h.Name] = true
		}
		if f.drains(h.Status) {
			toDrain = append(toDrain, h)
		}
	}
	var errs []error
	limit, err := c.MaxDrainOf(len(f.vetted))
	if err != nil {
		return err
	}
	if len(toDrain) > limit {
		names := make([]string, len(toDrain))
		for i, h := range toDrain {
			names[i] = h.Name
		}
		errs = append(errs, fmt.Errorf("%d nodes to drain (%s), more than slurm.max_drain %s allows (%d of %d vetted): none drained; so many at once is more likely the run's own problem (the plan, the cluster) than the nodes': look, then drain by hand or raise slurm.max_drain",
			len(toDrain), strings.Join(names, ", "), c.MaxDrain, limit, len(f.vetted)))
		toDrain = nil
	}
	for _, h := range toDrain {
		reason := Reason(s.RunID, h.Status, fleet.HostReason(h))
		if c.DryRun {
			f.say(fmt.Sprintf("dry run: would drain %s: scontrol update nodename=%s state=drain reason=%q", h.Name, h.Name, reason))
			continue
		}
		if err := f.drainIfFree(ctx, h.Name, reason); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %v", h.Name, err))
			continue
		}
		delete(f.resumed, h.Name) // drained anew: nothing to put back
		_ = f.run.Manifest.Deleted(resumedObj(h.Name, f.resv))
	}
	if c.DryRun && len(f.resumed) == 0 {
		return errors.Join(errs...)
	}
	for _, n := range sortedKeys(f.resumed) {
		if ok[n] {
			if err := f.forget(n); err != nil {
				errs = append(errs, err)
			}
			f.say(fmt.Sprintf("%s: ok: resumed (gpuvet drained it in run %s)", n, f.resumed[n].RunID))
		}
	}
	errs = append(errs, f.release(ctx, ok))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("backend slurm: %w", err)
	}
	return nil
}

func resumedObj(node string, resv *fleet.Object) fleet.Object {
	o := fleet.Object{Kind: KindResumed, Name: node}
	if resv != nil {
		o.On = resv.Name
	}
	return o
}

// drainIfFree drains a node unless someone else drained it during the run (their drain stays).
func (f *Fleet) drainIfFree(ctx context.Context, node, reason string) error {
	out, err := f.Slurm.Run(ctx, "scontrol", "-o", "show", "node", node)
	if err != nil {
		return err
	}
	ns, err := ParseNodes(out)
	if err != nil || len(ns) != 1 {
		return fmt.Errorf("reading the node before draining it: %v", err)
	}
	n := ns[0]
	d, err := ReadDrains(f.StateDir)
	if err != nil {
		return err
	}
	if _, resumed := f.resumed[node]; n.Drained() && !resumed && !d.Ours(f.cluster, n) {
		f.say(fmt.Sprintf("%s: %s: already drained by %s (%q): left alone", node, reason, orUnknown(n.ReasonBy), n.Reason))
		return nil
	}
	if err := f.drain(ctx, node, reason); err != nil {
		return err
	}
	f.say(fmt.Sprintf("%s: drained: %s", node, reason))
	return nil
}

// forget drops a node from the record of gpuvet's drains (it was resumed).
func (f *Fleet) forget(node string) error {
	d, err := ReadDrains(f.StateDir)
	if err != nil {
		return err
	}
	delete(d.Nodes, drainKey(f.cluster, node))
	return d.Save()
}
