package opennebula

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Sizing is what every VM gets, from the plan (opennebula.*).
type Sizing struct {
	TemplateID int    // > = 0: one.template.instantiate of this template; < 0: one.vm.allocate
	Image      string // DISK image name (allocate; with a template, replaces its disk when set)
	DiskMB     int    // DISK SIZE (0: the image's size)
	Network    string // NIC network name (allocate; with a template, when set)
	VCPU       int
	MemoryMB   int
	// PinPolicy is the TOPOLOGY PIN_POLICY used only when a VM's GPUs have no known NUMA node
	// (OpenNebula rejects NODE_AFFINITY and PIN_POLICY together). Empty: none.
	PinPolicy    string
	SSHPublicKey string // injected through CONTEXT so gpuvet can log in
}

// Spec is one VM to create: its name, the host it must land on and the GPUs it gets.
type Spec struct {
	Name   string
	Host   HostInfo
	GPUs   []GPU
	Index  []int // each GPU's index on the host (its place in the host's GPU list): results keep it
	Sizing Sizing
}

// NUMANode is the node every GPU of the VM sits on, or nil when one is unknown or they differ.
func (s Spec) NUMANode() *int {
	var node *int
	for _, g := range s.GPUs {
		if g.NUMANode == nil || (node != nil && *node != *g.NUMANode) {
			return nil
		}
		node = g.NUMANode
	}
	return node
}

// Template is the VM template text (whole, for allocate; the extra template, for instantiate):
// PCI passthrough by short address, NUMA affinity when known (pin policy only when not), the
// host pinned by SCHED_REQUIREMENTS, sizing and the SSH key.
func (s Spec) Template() string {
	var b strings.Builder
	attr := func(k, v string) { fmt.Fprintf(&b, "%s = \"%s\"\n", k, esc(v)) }
	attr("NAME", s.Name)
	if s.Sizing.VCPU > 0 {
		attr("VCPU", strconv.Itoa(s.Sizing.VCPU))
		attr("CPU", strconv.Itoa(s.Sizing.VCPU))
	}
	if s.Sizing.MemoryMB > 0 {
		attr("MEMORY", strconv.Itoa(s.Sizing.MemoryMB))
	}
	for _, g := range s.GPUs {
		fmt.Fprintf(&b, "PCI = [ SHORT_ADDRESS = \"%s\" ]\n", esc(g.ShortAddress))
	}
	if n := s.NUMANode(); n != nil {
		fmt.Fprintf(&b, "TOPOLOGY = [ NODE_AFFINITY = \"%d\" ]\n", *n)
	} else if s.Sizing.PinPolicy != "" {
		// OpenNebula spells its policies in capitals; the config takes any case.
		fmt.Fprintf(&b, "TOPOLOGY = [ PIN_POLICY = \"%s\" ]\n", esc(strings.ToUpper(s.Sizing.PinPolicy)))
	}
	attr("SCHED_REQUIREMENTS", fmt.Sprintf("ID = %d", s.Host.ID))
	if s.Sizing.Image != "" {
		if s.Sizing.DiskMB > 0 {
			fmt.Fprintf(&b, "DISK = [ IMAGE = \"%s\", SIZE = \"%d\" ]\n", esc(s.Sizing.Image), s.Sizing.DiskMB)
		} else {
			fmt.Fprintf(&b, "DISK = [ IMAGE = \"%s\" ]\n", esc(s.Sizing.Image))
		}
	}
	if s.Sizing.Network != "" {
		fmt.Fprintf(&b, "NIC = [ NETWORK = \"%s\" ]\n", esc(s.Sizing.Network))
	}
	fmt.Fprintf(&b, "CONTEXT = [ NETWORK = \"YES\", SSH_PUBLIC_KEY = \"%s\" ]\n", esc(strings.TrimSpace(s.Sizing.SSHPublicKey)))
	return b.String()
}

// esc escapes a value for a double-quoted OpenNebula template string.
func esc(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", " ").Replace(v)
}

// Plan is the VMs of a run and the hosts it leaves out.
type Plan struct {
	VMs     []Spec
	Skipped []results.SkippedHost
}

// PlanVMs picks the GPU hosts (MONITORED, in the clusters asked for, free GPUs) and makes one VM
// per host with all its free GPUs, or one per GPU with perGPU. A host or a cluster with no GPU is
// an explicit skipped row. runID names the VMs (gpuvet-RUN-HOST[-gN]).
func PlanVMs(pool []HostInfo, clusters []string, perGPU bool, runID string, sz Sizing) Plan {
	var p Plan
	withGPU := map[string]bool{}
	seen := map[string]bool{}
	want := func(h HostInfo) bool {
		return len(clusters) == 0 || slices.ContainsFunc(clusters, func(c string) bool { return c == h.Cluster || c == strconv.Itoa(h.ClusterID) })
	}
	sort.Slice(pool, func(i, j int) bool { return pool[i].Name < pool[j].Name })
	for _, h := range pool {
		if !want(h) {
			continue
		}
		seen[h.Cluster] = true
		if len(h.GPUs) == 0 {
			continue
		}
		withGPU[h.Cluster] = true
		if h.State != HostMonitored {
			p.Skipped = append(p.Skipped, results.SkippedHost{Name: h.Name, Reason: fmt.Sprintf("host state %d, not MONITORED (2): enable it or wait for monitoring", h.State)})
			continue
		}
		var free []GPU
		var idx []int
		for i, g := range h.GPUs {
			if g.VMID < 0 {
				free = append(free, g)
				idx = append(idx, i)
			}
		}
		if len(free) == 0 {
			p.Skipped = append(p.Skipped, results.SkippedHost{Name: h.Name, Reason: fmt.Sprintf("all %d GPUs are attached to VMs", len(h.GPUs))})
			continue
		}
		if !perGPU {
			p.VMs = append(p.VMs, Spec{Name: fmt.Sprintf("gpuvet-%s-%s", runID, h.Name), Host: h, GPUs: free, Index: idx, Sizing: sz})
			continue
		}
		for k, g := range free {
			p.VMs = append(p.VMs, Spec{Name: fmt.Sprintf("gpuvet-%s-%s-g%d", runID, h.Name, idx[k]), Host: h, GPUs: []GPU{g}, Index: []int{idx[k]}, Sizing: sz})
		}
	}
	for _, c := range clusters {
		if !seen[c] {
			p.Skipped = append(p.Skipped, results.SkippedHost{Name: "cluster " + c, Reason: "no host in this cluster"})
		}
	}
	for _, c := range slices.Sorted(maps.Keys(seen)) {
		if withGPU[c] {
			continue
		}
		p.Skipped = append(p.Skipped, results.SkippedHost{Name: "cluster " + c, Reason: "no NVIDIA GPU (PCI vendor 10de, class 0302) in its hosts' PCI monitoring: enable the PCI probe or pick another cluster"})
	}
	return p
}

// Waits bound how long gpuvet waits for OpenNebula.
type Waits struct {
	Boot    time.Duration // create → RUNNING (default 10 min)
	Cleanup time.Duration // terminate → DONE before recover-delete (default 5 min)
	Poll    time.Duration // between one.vm.info calls (default 5 s)
}

func (w Waits) withDefaults() Waits {
	return Waits{Boot: fleet.OrDefault(w.Boot, 10*time.Minute), Cleanup: fleet.OrDefault(w.Cleanup, 5*time.Minute), Poll: fleet.OrDefault(w.Poll, 5*time.Second)}
}

// Create makes the VM (instantiate or allocate) and returns its id.
func (c *Client) Create(ctx context.Context, s Spec) (int, error) {
	if s.Sizing.TemplateID >= 0 {
		return c.Instantiate(ctx, s.Sizing.TemplateID, s.Name, s.Template())
	}
	return c.Allocate(ctx, s.Template())
}

// WaitRunning polls the VM until ACTIVE/RUNNING with an IP, a failure state, or w.Boot.
func (c *Client) WaitRunning(ctx context.Context, id int, w Waits) (*VM, error) {
	w = w.withDefaults()
	deadline := time.Now().Add(w.Boot)
	for {
		v, err := c.VMInfo(ctx, id)
		if err != nil {
			return nil, err
		}
		running, failed := v.Phase()
		switch {
		case failed != "":
			why := ""
			if v.Error != "" {
				why = ": " + v.Error
			}
			return v, fmt.Errorf("VM %d failed to deploy: %s%s", id, failed, why)
		case running && len(v.IPs) == 0:
			return v, fmt.Errorf("VM %d is RUNNING but has no IP: give it a NIC (opennebula.network or the template's)", id)
		case running:
			return v, nil
		case time.Now().After(deadline):
			return v, fmt.Errorf("VM %d stuck in %s for %s (opennebula.boot_timeout): check the host's vfio-pci binding and the scheduler log", id, v.Where(), w.Boot)
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(w.Poll):
		}
	}
}

// Destroy terminates the VM (terminate-hard), waits for DONE, and falls back to recover-delete
// when it does not get there. Safe to run twice: a VM already gone is success.
func (c *Client) Destroy(ctx context.Context, id int, w Waits) error {
	w = w.withDefaults()
	if err := c.Action(ctx, "terminate-hard", id); err != nil && !IsNoExists(err) {
		// A VM in a failure state may refuse terminate: recover-delete below handles it.
		if rerr := c.RecoverDelete(ctx, id); rerr != nil && !IsNoExists(rerr) {
			return fmt.Errorf("VM %d: terminate-hard: %w; recover delete: %w", id, err, rerr)
		}
	}
	if c.waitDone(ctx, id, w.Cleanup, w.Poll) {
		return nil
	}
	if err := c.RecoverDelete(ctx, id); err != nil && !IsNoExists(err) {
		return fmt.Errorf("VM %d did not reach DONE within %s and recover delete failed: %w", id, w.Cleanup, err)
	}
	if c.waitDone(ctx, id, w.Cleanup, w.Poll) {
		return nil
	}
	v, _ := c.VMInfo(ctx, id)
	where := "unknown"
	if v != nil {
		where = v.Where()
	}
	return fmt.Errorf("VM %d still exists (%s) after terminate-hard and recover delete: remove it by hand (onevm recover --delete %d)", id, where, id)
}

// waitDone polls until the VM is DONE or gone, at most limit. The polls are paced by how fast VMs
// go: 100 ms first (a terminate-hard often finishes in a second), doubling up to poll, so a
// clean of several VMs takes about as long as the slowest, not poll × VMs.
func (c *Client) waitDone(ctx context.Context, id int, limit, poll time.Duration) bool {
	deadline := time.Now().Add(limit)
	wait := min(100*time.Millisecond, poll)
	for {
		v, err := c.VMInfo(ctx, id)
		if IsNoExists(err) || (err == nil && v.State == VMDone) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, poll)
	}
}
