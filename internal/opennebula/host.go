package opennebula

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/ssh"
)

// ObjectKind is the manifest kind of a VM gpuvet creates.
const ObjectKind = "opennebula-vm"

// VMHost is one VM of a fleet run (fleet.Host): Provision records it in the manifest, creates it,
// waits for RUNNING and SSH; Run runs the ssh backend's path inside it; Cleanup terminates it.
type VMHost struct {
	Client   *Client
	Spec     Spec
	Waits    Waits
	Manifest *fleet.Manifest // nil: no manifest (tests)
	// SSH reaches the VM: User, Port, key files and Options (AcceptNew with a run-local
	// known_hosts: the VM's key cannot be known before it exists). Target.Host is the VM's IP.
	SSH     ssh.Target
	SSHOpts ssh.Options
	Job     ssh.Job
	// PerGPU names the host NAME/gpuN (one VM per GPU); Combine folds them back into one host.
	PerGPU bool

	id       int
	client   *gossh.Client
	created  bool
	prepared bool         // Prepare was attempted: the run folder may exist in the VM
	dir      fleet.Object // the run folder in the VM, as the manifest lists it
	vm       results.VM
}

// ExpectGPUs is how many GPUs were passed through (fleet.GPUCounter): a VM that shows fewer fails.
func (h *VMHost) ExpectGPUs() int { return len(h.Spec.GPUs) }

// Name is the hypervisor host's name, with /gpuN when the VM holds one GPU of several.
func (h *VMHost) Name() string {
	if h.PerGPU {
		return fmt.Sprintf("%s/gpu%d", h.Spec.Host.Name, h.Spec.Index[0])
	}
	return h.Spec.Host.Name
}

func (h *VMHost) object() fleet.Object {
	return fleet.Object{Kind: ObjectKind, Name: h.Spec.Name, Host: h.Client.Endpoint()}
}

// Provision creates the VM and waits until gpuvet can log in; provisioning time is recorded.
func (h *VMHost) Provision(ctx context.Context) error {
	h.id = -1
	if h.Manifest != nil {
		if err := h.Manifest.Record(h.object()); err != nil {
			return fmt.Errorf("run manifest: %w (no VM created)", err)
		}
	}
	start := time.Now()
	h.created = true
	h.vm = results.VM{ID: -1, Name: h.Spec.Name, GPUs: h.Spec.Index, NUMANode: h.Spec.NUMANode()}
	id, err := h.Client.Create(ctx, h.Spec)
	if err != nil {
		return fmt.Errorf("create VM %s on %s: %w", h.Spec.Name, h.Spec.Host.Name, err)
	}
	h.id = id
	h.vm.ID = id
	for _, g := range h.Spec.GPUs {
		h.vm.PCI = append(h.vm.PCI, g.ShortAddress)
	}
	if h.vm.NUMANode == nil {
		h.vm.PinPolicy = h.Spec.Sizing.PinPolicy
	}
	v, err := h.Client.WaitRunning(ctx, id, h.Waits)
	if err != nil {
		return err
	}
	t := h.SSH
	t.Name, t.Host = h.Name(), v.IPs[0]
	if h.client, err = h.dialUntil(ctx, t, start.Add(h.Waits.withDefaults().Boot)); err != nil {
		return fmt.Errorf("VM %d (%s) is RUNNING but SSH does not answer: %w", id, v.IPs[0], err)
	}
	h.vm.ProvisionS = time.Since(start).Seconds()
	// The run folder in the VM is an object of its own: `gpuvet clean` of a killed run collects
	// its partial results from it before the VM (and its disk) goes.
	h.dir = fleet.Object{Kind: ssh.ObjectKind, Name: h.Job.RemoteDir, Host: ssh.Address(t), Via: t.Host,
		LocalOut: fleet.AbsPath(h.Job.LocalOut), KnownHosts: fleet.AbsPath(h.SSHOpts.KnownHosts[0]), On: h.Spec.Name}
	if len(t.IdentityFiles) == 1 {
		h.dir.Identity = t.IdentityFiles[0]
	}
	if h.Manifest != nil {
		if err := h.Manifest.Record(h.dir); err != nil {
			return fmt.Errorf("run manifest: %w (nothing created in the VM)", err)
		}
	}
	h.prepared = true
	return ssh.Prepare(ctx, h.client, h.Job)
}

// dialUntil retries while the VM's sshd is not up yet; a key or host-key refusal is final.
func (h *VMHost) dialUntil(ctx context.Context, t ssh.Target, deadline time.Time) (*gossh.Client, error) {
	for {
		c, err := ssh.Dial(ctx, t, h.SSHOpts)
		if err == nil || !errors.Is(err, ssh.ErrUnreachable) || time.Now().After(deadline) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(h.Waits.withDefaults().Poll):
		}
	}
}

// Run validates inside the VM; the summary's GPU indexes become the host's (Spec.Index).
func (h *VMHost) Run(ctx context.Context) (*results.Summary, error) {
	out, err := ssh.Execute(ctx, h.client, h.Job)
	if s := out.Summary; s != nil {
		for i := range s.Hosts {
			remapGPUs(&s.Hosts[i], h.Spec.Index)
		}
	}
	return out.Summary, err
}

// Cleanup terminates the VM (its disk and everything gpuvet put in it go with it). A VM whose id
// was never learned (create failed, or answered late) is looked up by its unique name.
func (h *VMHost) Cleanup(ctx context.Context) error {
	if h.client == nil && !h.created {
		return fleet.ErrNothingMade // no VM, no connection
	}
	var leftErr error
	if h.client != nil {
		// The VM's disk goes with it; removing the run folder first still matters for a VM that
		// outlives the run (terminate refused, or a persistent image).
		if h.prepared {
			leftErr = ssh.Remove(ctx, h.client, h.Job.RemoteDir, h.Job.RunID)
		}
		h.client.Close()
	}
	if !h.created {
		return nil
	}
	var err error
	if h.id < 0 { // its id never came back: found by name
		err = Clean(ctx, h.Client, h.object(), h.Waits)
	} else {
		err = h.Client.Destroy(ctx, h.id, h.Waits)
	}
	if err != nil {
		return err
	}
	h.vm.Terminated = true
	if h.Manifest != nil {
		if h.prepared { // gone with the VM's disk
			_ = h.Manifest.Deleted(h.dir)
		}
		if err := h.Manifest.Deleted(h.object()); err != nil {
			return err
		}
	}
	return leftErr
}

// Record is the VM as results keep it (after Cleanup: with Terminated).
func (h *VMHost) Record() results.VM { return h.vm }

// Attach adds each VM's record to the merged summary's host of the same name (before Combine).
func Attach(s *results.Summary, hosts []*VMHost) {
	for _, h := range hosts {
		i := slices.IndexFunc(s.Hosts, func(x results.Host) bool { return x.Name == h.Name() })
		if h.created && i >= 0 {
			s.Hosts[i].VMs = append(s.Hosts[i].VMs, h.Record())
		}
	}
}

// Clean removes every VM named as the manifest object is (a killed run's, or one whose id its
// run never learned).
func Clean(ctx context.Context, c *Client, o fleet.Object, w Waits) error {
	vms, err := c.VMsNamed(ctx, o.Name)
	if err != nil {
		return fmt.Errorf("find VM %s: %w", o.Name, err)
	}
	for _, v := range vms {
		if err := c.Destroy(ctx, v.ID, w); err != nil {
			return err
		}
	}
	return nil
}

// remapGPUs renames the VM's GPU indexes (0..n-1 inside it) to the host's.
func remapGPUs(h *results.Host, index []int) {
	m := func(i int) int {
		if i >= 0 && i < len(index) {
			return index[i]
		}
		return i
	}
	for i := range h.Discovery.GPUs {
		h.Discovery.GPUs[i].Index = m(h.Discovery.GPUs[i].Index)
	}
	if h.Health != nil {
		for i := range h.Health.GPUs {
			h.Health.GPUs[i].GPU.Index = m(h.Health.GPUs[i].GPU.Index)
		}
	}
	for mi := range h.Models {
		for ei := range h.Models[mi].Endpoints {
			g := h.Models[mi].Endpoints[ei].GPUs
			for k := range g {
				g[k] = m(g[k])
			}
		}
	}
}

// Combine folds the per-GPU VM hosts of a merged summary (NAME/gpuN) back into one host NAME:
// discovery, health GPUs, models' endpoints and VMs joined, so results line up GPU by GPU with a
// bare-metal run of the same host. Failed parts keep their errors.
func Combine(s *results.Summary, hostOf map[string]string) {
	var out []results.Host
	at := map[string]int{}
	for _, h := range s.Hosts {
		name := h.Name
		if hv, ok := hostOf[name]; ok {
			name = hv
		}
		i, seen := at[name]
		if !seen {
			h.Name = name
			at[name] = len(out)
			out = append(out, h)
			continue
		}
		dst := &out[i]
		dst.Discovery.GPUs = append(dst.Discovery.GPUs, h.Discovery.GPUs...)
		if h.Health != nil {
			if dst.Health == nil {
				dst.Health = h.Health
			} else {
				dst.Health.GPUs = append(dst.Health.GPUs, h.Health.GPUs...)
				dst.Health.Notes = append(dst.Health.Notes, h.Health.Notes...)
			}
		}
		for _, m := range h.Models {
			k := slices.IndexFunc(dst.Models, func(x results.Model) bool { return x.Model == m.Model })
			if k < 0 {
				dst.Models = append(dst.Models, m)
				continue
			}
			dst.Models[k].Endpoints = append(dst.Models[k].Endpoints, m.Endpoints...)
			dst.Models[k].Flags = append(dst.Models[k].Flags, m.Flags...)
			dst.Models[k].Status = results.Worse(dst.Models[k].Status, m.Status)
			if m.Error != "" {
				dst.Models[k].Error = results.JoinErr(dst.Models[k].Error, m.Error)
			}
		}
		dst.VMs = append(dst.VMs, h.VMs...)
		dst.Flags = append(dst.Flags, h.Flags...)
		dst.Status = results.Worse(dst.Status, h.Status)
		if h.Error != "" {
			dst.Error = results.JoinErr(dst.Error, h.Name+": "+h.Error)
		}
	}
	s.Hosts = out
}
