package opennebula

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/hostprep"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/ssh"
)

// The live bare-metal re-measure (opennebula.baremetal): before any VM is created, each node that
// gets VMs runs the host pipeline itself, over SSH, with its GPUs released from vfio-pci and the
// driver installed (ssh.Host with host preparation and VFIO); the node's cleanup restores vfio-pci
// and purges the driver before the VMs are made. The nodes' fresh figures are the baseline of the
// run's overhead table: same day, same driver as the VMs.
type baremetal struct {
	prep     *hostprep.Plan
	file     string            // the nodes' merged summary, the run's baseline
	failed   map[string]string // node -> why its VMs are not made (an incomplete vfio restore)
	nodes    []string
	baseline *results.Summary
}

// runBaremetal runs every node of specs on bare metal and returns the nodes whose VMs must not be
// made, with the reason.
func (f *Fleet) runBaremetal(ctx context.Context, r fleet.RunInfo, specs []Spec, bin, arch string) error {
	c := f.Plan.Config
	bm := &baremetal{prep: hostprep.ForNode(c), failed: map[string]string{}, file: filepath.Join(r.Out, "baremetal", "baseline.json")}
	f.bm = bm
	if bm.prep == nil {
		return fmt.Errorf("opennebula.baremetal needs host preparation: host_prep.enabled auto or true")
	}
	opts := ssh.OptionsFrom(f.SSH)
	seen := map[string]bool{}
	var hosts []fleet.Host
	for _, sp := range specs {
		node := sp.Host
		if seen[node.Name] {
			continue
		}
		seen[node.Name] = true
		t, err := ssh.Resolve(ssh.Target{Name: node.Name}, opts)
		if err != nil {
			return err
		}
		attached := map[string]string{}
		for _, g := range node.GPUs {
			if g.VMID >= 0 {
				attached[g.Address] = fmt.Sprintf("OpenNebula VM %d", g.VMID)
			}
		}
		args := []string{"--backend", "local", "--set", "environment=baremetal"}
		for _, s := range f.Config.BaremetalSet {
			args = append(args, "--set", s)
		}
		name := node.Name
		hosts = append(hosts, &ssh.Host{Target: t, Options: opts, Manifest: r.Manifest, Prep: bm.prep, VFIO: &ssh.VFIO{Attached: attached},
			Job: ssh.Job{Binary: bin, BinaryArch: arch, Plan: r.Plan, Args: args, RunID: r.ID, Env: f.Env,
				RemoteDir: path.Join(f.SSH.RemoteDir, "gpuvet-"+r.ID+"-"+ssh.Safe(name)+"-baremetal"),
				LocalOut:  filepath.Join(r.Out, "baremetal", ssh.Safe(name)),
				Progress: func(l string) {
					if r.Say != nil {
						r.Say("[" + name + " bare-metal] " + l)
					}
				}}})
		bm.nodes = append(bm.nodes, name)
	}
	if r.Say != nil {
		r.Say(fmt.Sprintf("bare-metal re-measure of %s before any VM (GPUs released from vfio-pci, restored after)", strings.Join(bm.nodes, ", ")))
	}
	outs := fleet.Run(ctx, hosts, fleet.Options{Parallel: f.Config.Parallel, CleanupTimeout: 20 * time.Minute,
		Progress: func(format string, a ...any) {
			if r.Say != nil {
				r.Say("bare-metal " + fmt.Sprintf(format, a...))
			}
		}})
	base := &results.Summary{SchemaVersion: results.SchemaVersion, RunID: r.ID, StartedAt: time.Now().UTC(), Backend: "ssh",
		Environment: "baremetal", Status: results.StatusOK, Complete: true}
	for _, o := range outs {
		rec := bm.prep.Record(o.Host)
		switch {
		case rec != nil && rec.RestoreError != "":
			bm.failed[o.Host] = rec.RestoreError
		case o.Err != nil:
			if r.Say != nil {
				r.Say(fmt.Sprintf("bare-metal %s: no baseline from this node (%s failed: %v)", o.Host, o.Phase, o.Err))
			}
		}
		if o.Err != nil || o.Summary == nil {
			continue
		}
		for _, h := range o.Summary.Hosts {
			h.Name = o.Host // matched host by host with the VMs' hosts
			base.Hosts = append(base.Hosts, h)
		}
		if base.Meta.Models == nil {
			base.Meta = o.Summary.Meta
		}
	}
	if len(base.Hosts) > 0 {
		bm.baseline = base
		if err := results.WriteJSON(bm.file, base); err != nil {
			return fmt.Errorf("bare-metal baseline %s: %v", bm.file, err)
		}
	}
	return nil
}

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
			s.Error = joinErr(s.Error, msg)
			s.Status = results.StatusFailed
		}
	}
	if bm.baseline == nil {
		s.Caveats = append(s.Caveats, "opennebula.baremetal: no node finished its bare-metal run: no overhead table (see out/baremetal/)")
		return
	}
	_ = judge.Baseline(s, bm.baseline, "", bm.file, f.Plan)
}
