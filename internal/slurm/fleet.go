package slurm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Manifest kinds: a job gpuvet submitted (Name its id, Host its node); a submission under way
// (Name the job's name: recorded before sbatch, so a kill between sbatch and the job id's record
// leaves a name `gpuvet clean` finds the held job by); the run's reservation over nodes gpuvet
// drained before, which it resumes to vet again (Name the reservation); and one such node
// resumed (Name the node, On the reservation): put back to drain unless a verdict says ok.
const (
	KindJob     = "slurm-job"
	KindSubmit  = "slurm-submit"
	KindResv    = "slurm-resv"
	KindResumed = "slurm-resumed"
)

// Kinds are every manifest kind of this backend.
var Kinds = []string{KindJob, KindSubmit, KindResv, KindResumed}

// Fleet is backend slurm (fleet.Backend, fleet.Closer, fleet.Verdicter).
type Fleet struct {
	Config config.Slurm
	// Plan is the run's plan (its sources name the settings in messages).
	Plan *config.Plan
	// Slurm runs the Slurm commands (Exec; tests may wrap it).
	Slurm Runner
	// StateDir holds gpuvet's record of the nodes it drained (fleet.StateDir).
	StateDir string
	// Out is the run's --out, absolute.
	Out string

	run     fleet.RunInfo
	cluster string
	resv    *fleet.Object    // the run's reservation, when it resumed nodes to vet them again
	resumed map[string]Drain // node → the drain gpuvet lifted to vet it again
	vetted  map[string]bool
}

// Parallel is slurm.parallel.
func (f *Fleet) Parallel() int { return f.Config.Parallel }

// CleanupTimeout bounds one node's cleanup: scancel and waiting for the job to end (Slurm's
// KillWait, 30 s by default, then SIGKILL), collecting its results.
func (f *Fleet) CleanupTimeout() time.Duration { return 3 * time.Minute }

// Finish adds nothing: a node's own summary says all.
func (f *Fleet) Finish(*results.Summary) {}

func (f *Fleet) say(line string) { f.run.Log(line) }

// Hosts lists the nodes to vet: the cluster's nodes with GPUs, filtered by partition, node list
// and reservation. A node drained by someone else, down or not responding is skipped and said; a
// node gpuvet itself drained (its record and its reason both say so) is vetted again under a
// reservation of the run's (a later ok resumes it).
func (f *Fleet) Hosts(ctx context.Context, r fleet.RunInfo) ([]fleet.Host, []results.SkippedHost, error) {
	f.run = r
	c := f.Config
	cfgOut, err := f.Slurm.Run(ctx, "scontrol", "show", "config")
	if err != nil {
		return nil, nil, fmt.Errorf("backend slurm: %w (gpuvet runs Slurm's own commands: install slurm-client and point SLURM_CONF at the cluster's slurm.conf)", err)
	}
	f.cluster = ClusterName(cfgOut)
	_ = r.Manifest.SetTarget("slurm_cluster", f.cluster)
	nodes, err := f.nodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	bin, err := f.binary()
	if err != nil {
		return nil, nil, err
	}
	shared := cmp.Or(c.SharedDir, filepath.Join(f.Out, "slurm"))
	runDir := filepath.Join(shared, "gpuvet-"+r.ID)
	drains, err := ReadDrains(f.StateDir)
	if err != nil {
		return nil, nil, err
	}
	var skipped []results.SkippedHost
	var use []Node
	var revet []Node
	for _, n := range nodes {
		switch why := n.Unusable(); {
		case n.GPUs == 0:
			skipped = append(skipped, results.SkippedHost{Name: n.Name, Reason: "no gres gpu"})
		case why == "drained" && drains.Ours(f.cluster, n) && !c.DryRun:
			revet = append(revet, n)
		case why == "drained" && drains.Ours(f.cluster, n):
			skipped = append(skipped, results.SkippedHost{Name: n.Name, Reason: fmt.Sprintf("drained by gpuvet (%s): a dry run does not resume it to vet it again", n.Reason)})
		case why == "drained":
			skipped = append(skipped, results.SkippedHost{Name: n.Name, Reason: fmt.Sprintf("drained by %s (%q): not gpuvet's drain, left alone", cmp.Or(n.ReasonBy, "someone"), n.Reason)})
		case why != "":
			skipped = append(skipped, results.SkippedHost{Name: n.Name, Reason: why + ": left alone"})
		default:
			use = append(use, n)
		}
	}
	if len(use)+len(revet) == 0 {
		return nil, skipped, fmt.Errorf("backend slurm: no node to vet (%d listed, %d skipped%s): check slurm.partition, slurm.nodes, slurm.reservation and `sinfo -N -o '%%N %%t %%G'`",
			len(nodes), len(skipped), firstSkip(skipped))
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("slurm.shared_dir %s: %w", shared, err)
	}
	resv := ""
	if len(revet) > 0 {
		if resv, err = f.reserve(ctx, revet, drains); err != nil {
			// Vetting them again needs an operator; the other nodes do not.
			f.say(err.Error())
		}
		for _, n := range revet {
			if _, ok := f.resumed[n.Name]; ok {
				use = append(use, n)
			} else {
				skipped = append(skipped, results.SkippedHost{Name: n.Name, Reason: fmt.Sprintf("drained by gpuvet (%s), and could not be resumed to vet it again (see above): left drained", n.Reason)})
			}
		}
	}
	if len(use) == 0 {
		if f.resv != nil { // made, but no node could be resumed into it
			_ = f.release(ctx, nil)
		}
		return nil, skipped, fmt.Errorf("backend slurm: no node to vet: %d skipped%s", len(skipped), firstSkip(skipped))
	}
	f.vetted = map[string]bool{}
	var hosts []fleet.Host
	for _, n := range use {
		f.vetted[n.Name] = true
		h := &Host{node: n, f: f, bin: bin, dir: filepath.Join(runDir, fleet.Safe(n.Name)),
			localOut: fleet.AbsPath(filepath.Join(r.Out, fleet.HostsDir, fleet.Safe(n.Name)))}
		if _, ok := f.resumed[n.Name]; ok {
			h.reservation = resv
		}
		hosts = append(hosts, h)
	}
	return hosts, skipped, nil
}

func firstSkip(s []results.SkippedHost) string {
	if len(s) == 0 {
		return ""
	}
	return fmt.Sprintf("; first: %s: %s", s[0].Name, s[0].Reason)
}

// nodes lists the cluster's nodes that the partition, node list and reservation select.
func (f *Fleet) nodes(ctx context.Context) ([]Node, error) {
	c := f.Config
	out, err := f.Slurm.Run(ctx, "scontrol", "-o", "show", "node")
	if err != nil {
		return nil, fmt.Errorf("backend slurm: listing nodes: %w", err)
	}
	all, err := ParseNodes(out)
	if err != nil {
		return nil, err
	}
	only := func(names []string) { // keeps the nodes names lists
		all = slices.DeleteFunc(all, func(n Node) bool { return !slices.Contains(names, n.Name) })
	}
	if len(c.Nodes) > 0 {
		names, err := f.hostnames(ctx, strings.Join(c.Nodes, ","))
		if err != nil {
			return nil, fmt.Errorf("slurm.nodes (%s): %w", f.Plan.Source("slurm.nodes"), err)
		}
		known := map[string]bool{}
		for _, n := range all {
			known[n.Name] = true
		}
		for _, n := range names {
			if !known[n] {
				return nil, fmt.Errorf("slurm.nodes (%s): node %s is not in the cluster (scontrol show node)", f.Plan.Source("slurm.nodes"), n)
			}
		}
		only(names)
	}
	if c.Partition != "" {
		all = slices.DeleteFunc(all, func(n Node) bool { return !slices.Contains(n.Partitions, c.Partition) })
	}
	if c.Reservation != "" {
		ro, err := f.Slurm.Run(ctx, "scontrol", "-o", "show", "reservation", c.Reservation)
		if err != nil {
			return nil, fmt.Errorf("slurm.reservation %s: %w", c.Reservation, err)
		}
		rf, err := Fields(strings.TrimSpace(ro))
		if err != nil || rf["Nodes"] == "" {
			return nil, fmt.Errorf("slurm.reservation %s: no nodes in %.200q", c.Reservation, ro)
		}
		names, err := f.hostnames(ctx, rf["Nodes"])
		if err != nil {
			return nil, fmt.Errorf("slurm.reservation %s: %w", c.Reservation, err)
		}
		only(names)
	}
	return all, nil
}

// hostnames expands a hostlist expression (node[1-4],gpu7) with scontrol.
func (f *Fleet) hostnames(ctx context.Context, expr string) ([]string, error) {
	out, err := f.Slurm.Run(ctx, "scontrol", "show", "hostnames", expr)
	if err != nil {
		return nil, err
	}
	return ParseHostnames(out), nil
}

// binary is gpuvet as the nodes run it.
func (f *Fleet) binary() (string, error) {
	if f.Config.Binary != "" {
		return f.Config.Binary, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("slurm.binary: %w (set it to gpuvet's path on the nodes)", err)
	}
	if e, err := filepath.EvalSymlinks(exe); err == nil {
		exe = e
	}
	return exe, nil
}

// reserve holds the nodes gpuvet drained before for this run: a maintenance reservation of the
// run's (only its jobs start there), then each node resumed, each step recorded first. A drain
// goes back on unless the verdict is ok (ApplyVerdicts, Close, or `gpuvet clean` after a kill).
func (f *Fleet) reserve(ctx context.Context, nodes []Node, drains *Drains) (string, error) {
	name := "gpuvet-" + f.run.ID
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	u, err := user.Current()
	if err != nil {
		return "", err
	}
	// Bounded: a reservation a killed run leaves ends by itself.
	dur := minutes(f.Config.TimeLimit.D() + f.Config.QueueTimeout.D() + 10*time.Minute)
	obj := fleet.Object{Kind: KindResv, Name: name}
	if err := f.run.Manifest.Record(obj); err != nil {
		return "", fmt.Errorf("run manifest: %w (nothing changed on the cluster)", err)
	}
	if _, err := f.Slurm.Run(ctx, "scontrol", "create", "reservation", "ReservationName="+name, "Nodes="+strings.Join(names, ","),
		"StartTime=now", "Duration="+strconv.Itoa(dur), "Users="+u.Username, "Flags=MAINT,IGNORE_JOBS"); err != nil {
		_ = f.run.Manifest.Deleted(obj)
		return "", fmt.Errorf("backend slurm: vetting again the nodes gpuvet drained (%s) needs a reservation of the run's: %w", strings.Join(names, ","), err)
	}
	f.resv = &obj
	f.resumed = map[string]Drain{}
	for _, n := range nodes {
		d := drains.Nodes[drainKey(f.cluster, n.Name)]
		o := fleet.Object{Kind: KindResumed, Name: n.Name, On: name}
		if err := f.run.Manifest.Record(o); err != nil {
			return "", fmt.Errorf("run manifest: %w", err)
		}
		if _, err := f.Slurm.Run(ctx, "scontrol", "update", "nodename="+n.Name, "state=resume"); err != nil {
			_ = f.run.Manifest.Deleted(o)
			f.say(fmt.Sprintf("%s: could not resume it to vet it again: %v", n.Name, err))
			continue
		}
		f.resumed[n.Name] = d
		f.say(fmt.Sprintf("%s: drained by gpuvet run %s; resumed under reservation %s to vet it again (drained again unless it is ok)", n.Name, d.RunID, name))
	}
	return name, nil
}

// Close puts back the drains of an interrupted run (no verdict came) and ends its reservation;
// a run that finished does both in ApplyVerdicts, once the verdicts are known.
func (f *Fleet) Close(ctx context.Context, _ []fleet.Outcome) error {
	if ctx.Err() == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return f.release(cctx, nil)
}

// release drains again each resumed node whose verdict is not ok (ok: nil for all), then deletes
// the run's reservation, marking each in the manifest.
func (f *Fleet) release(ctx context.Context, ok map[string]bool) error {
	var errs []error
	for _, n := range sortedKeys(f.resumed) {
		d := f.resumed[n]
		o := fleet.Object{Kind: KindResumed, Name: n, On: f.resv.Name}
		if !ok[n] {
			if err := f.drain(ctx, n, d.Reason); err != nil {
				errs = append(errs, fmt.Errorf("node %s: putting back gpuvet's drain: %w", n, err))
				continue
			}
		}
		_ = f.run.Manifest.Deleted(o)
	}
	if f.resv != nil {
		if err := DeleteReservation(ctx, f.Slurm, f.resv.Name); err != nil {
			errs = append(errs, err)
		} else {
			_ = f.run.Manifest.Deleted(*f.resv)
		}
	}
	return errors.Join(errs...)
}

// DeleteReservation deletes a reservation of gpuvet's (gone already: done).
func DeleteReservation(ctx context.Context, s Runner, name string) error {
	if !strings.HasPrefix(name, "gpuvet-") {
		return fmt.Errorf("reservation %q is not gpuvet's (gpuvet-RUN): left alone", name)
	}
	if _, err := s.Run(ctx, "scontrol", "delete", "reservation="+name); err != nil {
		if strings.Contains(err.Error(), "Invalid reservation") || strings.Contains(err.Error(), "not found") {
			return nil
		}
		return fmt.Errorf("deleting reservation %s: %w", name, err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
