package slurm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/gpuvet/gpuvet/internal/config"
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

// Drains is gpuvet's record of the nodes it drained, by cluster and node (drainKey). A drain
// outlives its run (the node stays out until a later ok run resumes it), so the record is not in
// a manifest but beside them: StateDir/slurm/drained.json.
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
		return nil, fmt.Errorf("%s: %w (gpuvet's record of the nodes it drained; move it away to start a new one: gpuvet then resumes none of the nodes it drained before)", d.path, err)
	}
	if d.Nodes == nil {
		d.Nodes = map[string]Drain{}
	}
	return d, nil
}

// Save writes the record (its folder made if missing).
func (d *Drains) Save() error { return results.WriteJSON(d.path, d) }

// UpdateDrains changes the record under its lock (a flock'd file beside it): read, fn, write.
// Without it, of two runs (or a run and a node's health check) sharing the state folder, one's
// write would drop the other's entry: a node gpuvet drained would never be resumed.
func UpdateDrains(stateDir string, fn func(*Drains) error) error {
	p := DrainsPath(stateDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	lf, err := os.OpenFile(p+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := lockWithin(lf, drainsLockWait); err != nil {
		return fmt.Errorf("%s: %w", lf.Name(), err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	d, err := ReadDrains(stateDir)
	if err != nil {
		return err
	}
	if err := fn(d); err != nil {
		return err
	}
	return d.Save()
}

// drainsLockWait bounds the wait for the drains record's lock: its holders only read and write the
// record, so a lock held longer is a process stuck (a hung file system), and a drain or resume
// must fail saying so rather than wait with it (a variable: the tests shorten it).
var drainsLockWait = time.Minute

// lockWithin takes f's exclusive flock, trying until wait has passed.
func lockWithin(f *os.File, wait time.Duration) error {
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("another process has held this lock for %s: another gpuvet (a run, or a node's health check) is stuck writing the record of drains; find it with `fuser %s`", wait, f.Name())
		}
	}
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
func drain(ctx context.Context, s Runner, stateDir, cluster, node, runID, reason string) error {
	if err := UpdateDrains(stateDir, func(d *Drains) error {
		d.Nodes[drainKey(cluster, node)] = Drain{RunID: runID, Reason: reason, At: time.Now().UTC()}
		return nil
	}); err != nil {
		return fmt.Errorf("recording the drain first: %w (node not drained)", err)
	}
	_, err := s.Run(ctx, "scontrol", "update", "nodename="+node, "state=drain", "reason="+reason)
	return err
}

func (f *Fleet) drain(ctx context.Context, node, reason string) error {
	return drain(ctx, f.Slurm, f.StateDir, f.cluster, node, f.run.ID, reason)
}

// forgetDrain drops a node from the record of gpuvet's drains (it was resumed).
func forgetDrain(stateDir, cluster, node string) error {
	return UpdateDrains(stateDir, func(d *Drains) error {
		delete(d.Nodes, drainKey(cluster, node))
		return nil
	})
}

// drains tells whether a node of status st is drained.
func (f *Fleet) drains(st results.Status) bool {
	c := f.Config
	return ((c.DrainFailed || c.DrainFlagged) && st == results.StatusFailed) || (c.DrainFlagged && st == results.StatusFlag)
}

// ApplyVerdicts acts on the judged nodes (fleet.Verdicter): with slurm.drain_failed (and
// drain_flagged) a failed (flagged) node is drained with its reason; a node gpuvet drained before
// and vetted again is resumed when ok now, drained again otherwise. The circuit breaker
// (slurm.max_drain) bounds the drains, failed nodes first; past it the rest are only reported and
// the run fails. Another's drain is left alone; slurm.dry_run takes no action. Each node's actions
// go to fleet.node_actions.
func (f *Fleet) ApplyVerdicts(ctx context.Context, s *results.Summary) error {
	c := f.Config
	ok := map[string]bool{}
	partial := map[string]string{} // ok, but not vetted whole: what the run left out
	var toDrain, flagged []results.Host
	for _, h := range s.Hosts {
		if !f.vetted[h.Name] {
			continue
		}
		// The hardware's status: a broken engine or a client that could not decide drains no node.
		st := h.GateStatus()
		if st == results.StatusOK {
			// Back into service only when vetted whole, with health, as an acceptance run does.
			if why := fleet.NotVettedWhole(h); why != "" {
				partial[h.Name] = why
			} else {
				ok[h.Name] = true
			}
		}
		switch {
		case !f.drains(st):
		case st == results.StatusFailed:
			toDrain = append(toDrain, h)
		default:
			flagged = append(flagged, h)
		}
	}
	// Failed before flagged: what the breaker lets through is the worst first.
	toDrain = append(toDrain, flagged...)
	limit, err := config.ParseMaxUnhealthy(c.MaxDrain)
	if err != nil {
		return fmt.Errorf("slurm.max_drain: %w", err)
	}
	breaker := fleet.NewBreaker(limit, len(f.vetted))
	var errs []error
	for _, h := range toDrain {
		act := f.drainOne(ctx, h, Reason(s.RunID, h.GateStatus(), fleet.HostReason(h)), breaker)
		if act.Error != "" {
			errs = append(errs, fmt.Errorf("node %s: %s", h.Name, act.Error))
		}
		fleet.RecordAction(s, act)
	}
	verb := "drained"
	if c.DryRun {
		verb = "would have been drained"
	}
	if err := breaker.Err(verb); err != nil {
		errs = append([]error{fmt.Errorf("%w: look, then drain by hand or raise slurm.max_drain", err)}, errs...)
	}
	if !c.DryRun || len(f.resumed) > 0 {
		for _, n := range sortedKeys(f.resumed) {
			if why := partial[n]; why != "" {
				f.say(fmt.Sprintf("%s: ok, but not resumed: %s; a resume needs the whole node vetted, with health (gpuvet's drain stays)", n, why))
				fleet.RecordAction(s, results.NodeAction{Node: n, Status: results.StatusOK, Did: []string{"not resumed: " + why + ": a resume needs the whole node vetted, with health"}})
			}
			if ok[n] {
				if err := forgetDrain(f.StateDir, f.cluster, n); err != nil {
					errs = append(errs, err)
				}
				f.say(fmt.Sprintf("%s: ok: resumed (gpuvet drained it in run %s)", n, f.resumed[n].RunID))
				fleet.RecordAction(s, results.NodeAction{Node: n, Status: results.StatusOK, Did: []string{"resumed (gpuvet drained it in run " + f.resumed[n].RunID + ")"}})
			}
		}
		errs = append(errs, f.release(ctx, ok))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("backend slurm: %w", err)
	}
	return nil
}

// drainOne drains one judged node when the breaker allows it (in a dry run, says it would).
func (f *Fleet) drainOne(ctx context.Context, h results.Host, reason string, breaker *fleet.Breaker) results.NodeAction {
	act := results.NodeAction{Node: h.Name, Status: h.GateStatus(), DryRun: f.Config.DryRun}
	what := fmt.Sprintf("drain %s: scontrol update nodename=%s state=drain reason=%q", h.Name, h.Name, reason)
	switch {
	case !breaker.Allow(what):
		act.Held = what
		f.say(fmt.Sprintf("%s: CIRCUIT BREAKER: not drained (slurm.max_drain %s reached): would have: %s", h.Name, f.Config.MaxDrain, what))
	case f.Config.DryRun:
		act.Did = []string{"dry run: would have drained: " + reason}
		f.say(fmt.Sprintf("dry run: would %s", what))
	default:
		did, err := f.drainIfFree(ctx, h.Name, reason)
		if err != nil {
			act.Error = err.Error()
			break
		}
		act.Did = []string{did}
		delete(f.resumed, h.Name) // drained anew: nothing to put back
		_ = f.run.Manifest.Deleted(resumedObj(h.Name, f.resv))
	}
	return act
}

func resumedObj(node string, resv *fleet.Object) fleet.Object {
	o := fleet.Object{Kind: KindResumed, Name: node}
	if resv != nil {
		o.On = resv.Name
	}
	return o
}

// drainIfFree drains a node unless someone else drained it during the run (their drain stays);
// it says which.
func (f *Fleet) drainIfFree(ctx context.Context, node, reason string) (string, error) {
	n, err := showNode(ctx, f.Slurm, node)
	if err != nil {
		return "", fmt.Errorf("reading the node before draining it: %w", err)
	}
	d, err := ReadDrains(f.StateDir)
	if err != nil {
		return "", err
	}
	if _, resumed := f.resumed[node]; n.Drained() && !resumed && !d.Ours(f.cluster, n) {
		did := fmt.Sprintf("already drained by %s (%q): left alone", cmp.Or(n.ReasonBy, "someone"), n.Reason)
		f.say(fmt.Sprintf("%s: %s: %s", node, reason, did))
		return did, nil
	}
	if err := f.drain(ctx, node, reason); err != nil {
		return "", err
	}
	f.say(fmt.Sprintf("%s: drained: %s", node, reason))
	return "drained: " + reason, nil
}
