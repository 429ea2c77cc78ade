package opennebula

import (
	"context"
	"path"
	"path/filepath"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/ssh"
)

// Fleet is what every VM of a run shares.
type Fleet struct {
	Config   config.OpenNebula
	SSH      config.SSH // how gpuvet logs into the VMs (identity_file, binary, remote_backend)
	Plan     []byte     // the plan as YAML (config.Plan.RemoteYAML)
	RunID    string
	Out      string // local output folder: each VM's results go to OUT/hosts/NAME
	Manifest *fleet.Manifest
	Progress func(line string)
}

// Waits are the config's timeouts.
func WaitsFrom(c config.OpenNebula) Waits {
	return Waits{Boot: c.BootTimeout.D(), Cleanup: c.CleanupTimeout.D(), Poll: c.Poll.D()}
}

// Hosts discovers the GPU hosts and returns one fleet host per VM to create, and the hosts and
// clusters it leaves out (each with its reason).
func (f Fleet) Hosts(ctx context.Context, c *Client) ([]*VMHost, []results.SkippedHost, error) {
	pool, err := c.HostPool(ctx)
	if err != nil {
		return nil, nil, err
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
	plan := PlanVMs(pool, o.Clusters, o.VMPerGPU, f.RunID, Sizing{TemplateID: o.TemplateID, Image: o.Image, DiskMB: o.DiskMB,
		Network: o.Network, VCPU: o.VCPU, MemoryMB: o.MemoryMB, PinPolicy: o.PinPolicy, SSHPublicKey: key})
	opts := ssh.OptionsFrom(f.SSH)
	// A VM's host key cannot be known before the VM exists: trust it on first use, in a file of
	// this run only (never the user's known_hosts).
	opts.KnownHosts, opts.AcceptNew = []string{filepath.Join(f.Out, "vm_known_hosts")}, true
	opts.ConfigFile = "/dev/null"
	var hosts []*VMHost
	for _, spec := range plan.VMs {
		h := &VMHost{Client: c, Spec: spec, Waits: WaitsFrom(o), Manifest: f.Manifest, PerGPU: o.VMPerGPU,
			SSH: ssh.Target{User: o.SSHUser, Port: o.SSHPort}, SSHOpts: opts}
		if f.SSH.IdentityFile != "" {
			h.SSH.IdentityFiles = []string{f.SSH.IdentityFile}
		}
		name := h.Name()
		h.Job = ssh.Job{Binary: bin, BinaryArch: arch, Plan: f.Plan, Args: []string{"--backend", f.SSH.RemoteBackend},
			RemoteDir: path.Join(f.SSH.RemoteDir, spec.Name), // gpuvet-RUN-HOST[-gN]
			LocalOut:  filepath.Join(f.Out, "hosts", spec.Name),
			Progress: func(l string) {
				if f.Progress != nil {
					f.Progress("[" + name + "] " + l)
				}
			}}
		hosts = append(hosts, h)
	}
	return hosts, plan.Skipped, nil
}

// Finish adds the VMs' records to the merged summary and folds per-GPU VMs into their hosts.
func Finish(s *results.Summary, hosts []*VMHost) {
	Attach(s, hosts)
	names := map[string]string{}
	for _, h := range hosts {
		names[h.Name()] = h.Spec.Host.Name
	}
	Combine(s, names)
}
