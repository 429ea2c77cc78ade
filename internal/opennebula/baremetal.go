package opennebula

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/hostprep"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/ssh"
)

// The live bare-metal re-measure (opennebula.baremetal): before any VM is created, each node that
// gets VMs runs the host pipeline over SSH with its GPUs released from vfio-pci and the driver
// installed (ssh.Host with host preparation and VFIO), restored and purged before the VMs are
// made: a fleet run inside the run (fleet.Nested), its summary in out/baremetal/. The nodes'
// figures are the baseline of the overhead table: same day, same driver as the VMs.
type baremetal struct {
	prep     *hostprep.Plan
	file     string            // the nodes whose run finished, the run's baseline
	failed   map[string]string // node -> why its VMs are not made (an incomplete vfio restore)
	nodes    []string
	baseline *results.Summary
}

// runBaremetal runs every node of specs on bare metal, writes the baseline, and records the nodes
// whose VMs must not be made, with the reason. An error is bad input: nothing was started.
func (f *Fleet) runBaremetal(ctx context.Context, r fleet.RunInfo, specs []Spec, bin, arch string) error {
	bm := &baremetal{prep: hostprep.ForNode(f.Plan.Config), failed: map[string]string{}, file: filepath.Join(r.Out, "baremetal", "baseline.json")}
	f.bm = bm
	if bm.prep == nil {
		return fmt.Errorf("opennebula.baremetal needs host preparation: host_prep.enabled auto or true")
	}
	// The nodes' own runs take these overrides; the nested run records and judges with them too.
	sets := append([]string{"environment=baremetal"}, f.Config.BaremetalSet...)
	plan, err := f.Plan.With(sets...)
	if err != nil {
		return fmt.Errorf("opennebula.baremetal_set: %w", err)
	}
	say := r.Log
	nodes := &nodeRun{f: f, specs: specs, bin: bin, arch: arch, sets: sets, prep: bm.prep, say: say}
	nr := r
	nr.Out, nr.Say = filepath.Join(r.Out, "baremetal"), func(l string) { say("bare-metal " + l) }
	s, outs, err := fleet.Nested(ctx, plan, nodes, nr)
	if s == nil {
		return err
	}
	if err != nil { // the nodes' summary not written: their figures are still the baseline
		say("bare-metal: WARNING: " + err.Error())
	}
	bm.nodes = nodes.names
	for _, o := range outs {
		rec := bm.prep.Record(o.Host)
		switch {
		case rec != nil && rec.RestoreError != "":
			bm.failed[o.Host] = rec.RestoreError
		case o.Err != nil:
			say(fmt.Sprintf("bare-metal %s: no baseline from this node (%s failed: %v)", o.Host, o.Phase, o.Err))
		}
	}
	if bm.baseline = fleet.Succeeded(s, outs); bm.baseline != nil {
		if err := results.WriteJSON(bm.file, bm.baseline); err != nil {
			return fmt.Errorf("bare-metal baseline %s: %w", bm.file, err)
		}
	}
	return nil
}

// nodeRun is the bare-metal re-measure as a fleet backend: one ssh host per node that gets VMs,
// running `gpuvet run --backend local` there with the baremetal overrides.
type nodeRun struct {
	f         *Fleet
	specs     []Spec
	bin, arch string
	sets      []string
	prep      *hostprep.Plan
	say       func(string) // the outer run's progress
	names     []string
}

// Hosts is each node once, reached over SSH by its name (ssh_config, ssh.user), its GPUs that VMs
// hold said (the vfio release leaves them alone).
func (n *nodeRun) Hosts(ctx context.Context, r fleet.RunInfo) ([]fleet.Host, []results.SkippedHost, error) {
	opts := ssh.OptionsFrom(n.f.SSH)
	args := []string{"--backend", "local"}
	for _, s := range n.sets {
		args = append(args, "--set", s)
	}
	seen := map[string]bool{}
	var hosts []fleet.Host
	for _, sp := range n.specs {
		node := sp.Host
		if seen[node.Name] {
			continue
		}
		seen[node.Name] = true
		t, err := ssh.Resolve(ssh.Target{Name: node.Name}, opts)
		if err != nil {
			return nil, nil, err
		}
		attached := map[string]string{}
		for _, g := range node.GPUs {
			if g.VMID >= 0 {
				attached[g.Address] = fmt.Sprintf("OpenNebula VM %d", g.VMID)
			}
		}
		name := node.Name
		hosts = append(hosts, &ssh.Host{Target: t, Options: opts, Manifest: r.Manifest, Prep: n.prep, VFIO: &ssh.VFIO{Attached: attached},
			Job: ssh.Job{Binary: n.bin, BinaryArch: n.arch, Plan: r.Plan, Args: slices.Clone(args), RunID: r.ID, Env: n.f.Env,
				RemoteDir: path.Join(n.f.SSH.RemoteDir, "gpuvet-"+r.ID+"-"+fleet.Safe(name)+"-baremetal"),
				LocalOut:  filepath.Join(r.Out, fleet.Safe(name)),
				Progress:  func(l string) { n.say("[" + name + " bare-metal] " + l) }}})
		n.names = append(n.names, name)
	}
	n.say(fmt.Sprintf("bare-metal re-measure of %s before any VM (GPUs released from vfio-pci, restored after)", strings.Join(n.names, ", ")))
	return hosts, nil, nil
}

// Parallel is opennebula.parallel.
func (n *nodeRun) Parallel() int { return n.f.Config.Parallel }

// CleanupTimeout bounds one node's cleanup: the vfio restore and the driver's purge.
func (n *nodeRun) CleanupTimeout() time.Duration { return 20 * time.Minute }

// Finish says how the nodes were reached: over SSH, each running its own host pipeline.
func (n *nodeRun) Finish(s *results.Summary) { s.Backend = "ssh" }

// finishBaremetal adds each node's preparation record to its hosts, fails loudly the nodes whose
// vfio restore is incomplete, and compares the VMs against the nodes' fresh figures.
func (f *Fleet) finishBaremetal(s *results.Summary) {
	bm := f.bm
	if bm == nil {
		return
	}
	for i := range s.Hosts {
		h := &s.Hosts[i]
		node, _, _ := strings.Cut(h.Name, "/")
		if rec := bm.prep.Record(node); rec != nil {
			h.Prep = rec
		}
	}
	for _, node := range bm.nodes {
		if why, bad := bm.failed[node]; bad {
			msg := node + ": " + why
			s.Caveats = append(s.Caveats, msg)
			s.Error = results.JoinErr(s.Error, msg)
			s.Status = results.StatusFailed
		}
	}
	if bm.baseline == nil {
		s.Caveats = append(s.Caveats, "opennebula.baremetal: no node finished its bare-metal run: no overhead table (see out/baremetal/)")
		return
	}
	_ = judge.Baseline(s, bm.baseline, "", bm.file, f.Plan)
}
