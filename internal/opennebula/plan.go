package opennebula

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/ssh"
)

// Fleet is the opennebula backend of a fleet run (fleet.Backend): one VM per GPU host (or per
// GPU), each reached over SSH and running the ssh backend's path inside it.
type Fleet struct {
	Config config.OpenNebula
	SSH    config.SSH // how gpuvet logs into the VMs (identity_file, binary, remote_backend)
	Client *Client
	Env    map[string]string // secrets for the VMs' runs (ssh.SecretsFromEnv)
	// Plan is the run's plan: the bare-metal re-measure (opennebula.baremetal) prepares the nodes
	// from it and judges the VMs against the nodes' figures with it.
	Plan *config.Plan

	hosts []*VMHost
	bm    *baremetal
}

// Waits are the config's timeouts.
func WaitsFrom(c config.OpenNebula) Waits {
	return Waits{Boot: c.BootTimeout.D(), Cleanup: c.CleanupTimeout.D(), Poll: c.Poll.D()}
}

// Parallel is opennebula.parallel.
func (f *Fleet) Parallel() int { return f.Config.Parallel }

// CleanupTimeout bounds one VM's cleanup: terminate-hard and up to cleanup_timeout for DONE, then
// recover-delete and up to cleanup_timeout again, plus the run folder's removal over SSH.
func (f *Fleet) CleanupTimeout() time.Duration {
	return 2*WaitsFrom(f.Config).withDefaults().Cleanup + 2*time.Minute
}

// Hosts discovers the GPU hosts and returns one fleet host per VM to create, and the hosts and
// clusters it leaves out (each with its reason).
func (f *Fleet) Hosts(ctx context.Context, r fleet.RunInfo) ([]fleet.Host, []results.SkippedHost, error) {
	c := f.Client
	pool, err := c.HostPool(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("opennebula %s: %w", c.Endpoint(), err)
	}
	key, err := ssh.PublicKey(f.SSH.IdentityFile, "")
	if err != nil {
		return nil, nil, err
	}
	bin, arch, err := ssh.Binary(f.SSH.Binary)
	if err != nil {
		return nil, nil, err
	}
	o := f.Config
	plan := PlanVMs(pool, o.Clusters, o.VMPerGPU, r.ID, Sizing{TemplateID: o.TemplateID, Image: o.Image, DiskMB: o.DiskMB,
		Network: o.Network, VCPU: o.VCPU, MemoryMB: o.MemoryMB, PinPolicy: o.PinPolicy, SSHPublicKey: key})
	if o.Baremetal {
		// Before any VM: the nodes' own figures, with their GPUs out of vfio-pci and back after.
		if err := f.runBaremetal(ctx, r, plan.VMs, bin, arch); err != nil {
			return nil, nil, err
		}
		var keep []Spec
		for _, sp := range plan.VMs {
			if why, bad := f.bm.failed[sp.Host.Name]; bad {
				plan.Skipped = append(plan.Skipped, results.SkippedHost{Name: sp.Host.Name, Reason: "no VM: " + why})
				continue
			}
			keep = append(keep, sp)
		}
		plan.VMs = keep
	}
	opts := ssh.OptionsFrom(f.SSH)
	// A VM's host key cannot be known before the VM exists: trust it on first use, in a file of
	// this run only (never the user's known_hosts; --force clears an earlier run's, whose VMs may have had these IPs).
	opts.KnownHosts, opts.AcceptNew = []string{filepath.Join(r.Out, "vm_known_hosts")}, true
	opts.ConfigFile = "/dev/null"
	var out []fleet.Host
	for _, spec := range plan.VMs {
		h := &VMHost{Client: c, Spec: spec, Waits: WaitsFrom(o), Manifest: r.Manifest, PerGPU: o.VMPerGPU,
			SSH: ssh.Target{User: o.SSHUser, Port: o.SSHPort, IdentityFiles: ssh.IdentityFiles(f.SSH.IdentityFile)}, SSHOpts: opts}
		name := h.Name()
		// The GPUs passed through travel with the plan: the VM's own health phase checks the count.
		args := []string{"--backend", f.SSH.RemoteBackend, "--set", "health.expect_gpus=" + strconv.Itoa(len(spec.GPUs))}
		h.Job = ssh.Job{Binary: bin, BinaryArch: arch, Plan: r.Plan, Args: args, RunID: r.ID, Env: f.Env,
			// The host's name is OpenNebula's: made one path element ("/", ".." never leave the folder).
			RemoteDir: path.Join(f.SSH.RemoteDir, fleet.Safe(spec.Name)), // gpuvet-RUN-HOST[-gN]
			LocalOut:  filepath.Join(r.Out, fleet.HostsDir, fleet.Safe(spec.Name)),
			Progress:  func(l string) { r.Log("[" + name + "] " + l) }}
		f.hosts = append(f.hosts, h)
		out = append(out, h)
	}
	return out, plan.Skipped, nil
}

// Finish adds the VMs' records to the merged summary and folds per-GPU VMs into their hosts.
func (f *Fleet) Finish(s *results.Summary) {
	Attach(s, f.hosts)
	names := map[string]string{}
	for _, h := range f.hosts {
		names[h.Name()] = h.Spec.Host.Name
	}
	Combine(s, names)
	f.finishBaremetal(s)
}
