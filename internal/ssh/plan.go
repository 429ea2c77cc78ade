package ssh

import (
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/filelimit"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/hostprep"
	"github.com/gpuvet/gpuvet/internal/results"
)

// InventoryHost is one host of an inventory file.
type InventoryHost struct {
	Name         string   `yaml:"name"`          // required: names the host in results
	Host         string   `yaml:"host"`          // address (default: ssh_config HostName, else name)
	User         string   `yaml:"user"`          //
	Port         int      `yaml:"port"`          //
	IdentityFile string   `yaml:"identity_file"` //
	GPUs         int      `yaml:"gpus"`          // vet only the first N GPUs there (run.gpu_count)
	Set          []string `yaml:"set"`           // key=value config overrides for this host's run
}

// ReadInventory reads an inventory: `hosts:` with one entry per host. Unknown keys are errors.
func ReadInventory(file string) ([]InventoryHost, error) {
	b, err := filelimit.Read(file, filelimit.Config, "inventory")
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	return ParseInventory(file, b)
}

// ParseInventory is ReadInventory on bytes (file names the source in errors).
func ParseInventory(file string, b []byte) ([]InventoryHost, error) {
	var inv struct {
		Hosts []InventoryHost `yaml:"hosts"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&inv); err != nil {
		return nil, fmt.Errorf("inventory %s: %w (want hosts: [{name, host, user, port, identity_file, gpus, set}])", file, err)
	}
	if len(inv.Hosts) == 0 {
		return nil, fmt.Errorf("inventory %s: no hosts (want a hosts: list)", file)
	}
	seen := map[string]bool{}
	for i, h := range inv.Hosts {
		where := fmt.Sprintf("inventory %s: hosts[%d]", file, i)
		switch {
		case strings.TrimSpace(h.Name) == "":
			return nil, fmt.Errorf("%s: name is required", where)
		case seen[h.Name]:
			return nil, fmt.Errorf("%s: host %s is listed twice", where, h.Name)
		case h.Port < 0 || h.Port > 65535:
			return nil, fmt.Errorf("%s (%s): port %d is not a port", where, h.Name, h.Port)
		case h.GPUs < 0:
			return nil, fmt.Errorf("%s (%s): gpus %d: want ≥ 0", where, h.Name, h.GPUs)
		}
		for _, s := range h.Set {
			if k, _, ok := strings.Cut(s, "="); !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("%s (%s): set %q: want key=value", where, h.Name, s)
			}
		}
		seen[h.Name] = true
	}
	return inv.Hosts, nil
}

// Fleet is the ssh backend of a fleet run (fleet.Backend): the hosts of ssh.hosts and the
// inventory, each running gpuvet over SSH.
type Fleet struct {
	Config config.SSH
	// Env is the secrets each host's run gets (SecretEnv's, from this environment).
	Env map[string]string
	// Prep prepares each host (hostprep.FromConfig; nil: off).
	Prep *hostprep.Plan
}

// SecretEnv are the variables a host's own run needs from this one's environment (gated model
// downloads). They reach the host on the session's stdin: never argv, a file or a log.
var SecretEnv = []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}

// SecretsFromEnv picks SecretEnv's variables that are set here.
func SecretsFromEnv() map[string]string {
	out := map[string]string{}
	for _, k := range SecretEnv {
		if v := os.Getenv(k); v != "" {
			out[k] = v
		}
	}
	return out
}

// OptionsFrom are the client settings from the config.
func OptionsFrom(c config.SSH) Options {
	o := Options{ConfigFile: c.ConfigFile, User: c.User, Port: c.Port, ConnectTimeout: c.ConnectTimeout.D(), IdentityFile: c.IdentityFile}
	if c.KnownHosts != "" {
		o.KnownHosts = []string{expandHome(c.KnownHosts)}
	}
	return o
}

// Parallel is ssh.parallel.
func (f Fleet) Parallel() int { return f.Config.Parallel }

// CleanupTimeout bounds one host's cleanup: stopping a run still going (up to 30 s), removing
// the folder, reconnecting once; with host preparation, purging what it installed (a driver's
// DKMS module takes minutes to remove).
func (f Fleet) CleanupTimeout() time.Duration {
	if f.Prep != nil {
		return 15 * time.Minute
	}
	return 2 * time.Minute
}

// Finish adds each host's preparation record (installed, used, removed, left) to its entry.
func (f Fleet) Finish(s *results.Summary) {
	if f.Prep == nil {
		return
	}
	for i := range s.Hosts {
		h := &s.Hosts[i]
		name, _, _ := strings.Cut(h.Name, "/") // a host's summary with several hosts is HOST/NAME
		if r := f.Prep.Record(name); r != nil {
			h.Prep = r
			if r.RestoreError != "" {
				// Loud: a node without vfio on its GPUs cannot serve passthrough VMs.
				h.Error = results.JoinErr(h.Error, r.RestoreError)
				s.Caveats = append(s.Caveats, name+": "+r.RestoreError)
			}
			if len(r.Left) > 0 {
				s.Caveats = append(s.Caveats, fmt.Sprintf("%s: host preparation LEFT %s on the host: run `gpuvet clean`", name, strings.Join(r.Left, ", ")))
			}
		}
	}
}

// Hosts builds the fleet's hosts from ssh.hosts and the inventory.
func (f Fleet) Hosts(ctx context.Context, r fleet.RunInfo) ([]fleet.Host, []results.SkippedHost, error) {
	var inv []InventoryHost
	for _, h := range f.Config.Hosts {
		inv = append(inv, InventoryHost{Name: h})
	}
	if f.Config.Inventory != "" {
		more, err := ReadInventory(f.Config.Inventory)
		if err != nil {
			return nil, nil, err
		}
		inv = append(inv, more...)
	}
	bin, arch, err := Binary(f.Config.Binary)
	if err != nil {
		return nil, nil, err
	}
	opts := OptionsFrom(f.Config)
	seen := map[string]bool{}
	var out []fleet.Host
	var targets []Target
	for _, ih := range inv {
		if seen[ih.Name] {
			return nil, nil, fmt.Errorf("host %s is listed twice (ssh.hosts and the inventory)", ih.Name)
		}
		seen[ih.Name] = true
		t := Target{Name: ih.Name, Host: ih.Host, User: ih.User, Port: ih.Port}
		if ih.IdentityFile != "" {
			t.IdentityFiles = IdentityFiles(ih.IdentityFile)
		}
		if t, err = Resolve(t, opts); err != nil {
			return nil, nil, err
		}
		args := []string{"--backend", f.Config.RemoteBackend}
		if ih.GPUs > 0 {
			args = append(args, "--gpu-count", strconv.Itoa(ih.GPUs))
		}
		for _, s := range ih.Set {
			args = append(args, "--set", s)
		}
		name := ih.Name
		host := &Host{Target: t, Options: opts, Manifest: r.Manifest, GPUs: ih.GPUs, Prep: f.Prep, Job: Job{
			Binary: bin, BinaryArch: arch, Plan: r.Plan, Args: args, RunID: r.ID, Env: f.Env,
			RemoteDir: path.Join(f.Config.RemoteDir, "gpuvet-"+r.ID+"-"+fleet.Safe(name)),
			LocalOut:  filepath.Join(r.Out, "hosts", fleet.Safe(name)),
			Progress:  func(l string) { r.Log("[" + name + "] " + l) },
		}}
		if f.Prep != nil && f.Prep.VFIORelease {
			host.VFIO = &VFIO{}
		}
		out = append(out, host)
		targets = append(targets, t)
	}
	if err := resolveAll(ctx, targets); err != nil {
		return nil, nil, err
	}
	return out, nil, nil
}

// resolveTimeout bounds the name lookups of a fleet's hosts (done together).
const resolveTimeout = 10 * time.Second

// resolveAll looks every host's address up before anything starts: a name that does not resolve
// is a typo in the input (bad input), not a host that failed.
func resolveAll(ctx context.Context, targets []Target) error {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	bad := make([]string, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		if net.ParseIP(t.Host) != nil {
			continue
		}
		wg.Go(func() {
			if _, err := net.DefaultResolver.LookupHost(ctx, t.Host); err != nil {
				why := err.Error()
				var de *net.DNSError
				if errors.As(err, &de) {
					why = de.Err
				}
				bad[i] = fmt.Sprintf("%s (%s) does not resolve: %s", t.Name, t.Host, why)
				if t.Name == t.Host {
					bad[i] = fmt.Sprintf("%s does not resolve: %s", t.Name, why)
				}
			}
		})
	}
	wg.Wait()
	bad = slices.DeleteFunc(bad, func(s string) bool { return s == "" })
	if len(bad) > 0 {
		return fmt.Errorf("ssh.hosts: %s: fix the name (or its HostName in ~/.ssh/config), or drop the host; nothing was started", strings.Join(bad, "; "))
	}
	return nil
}

// Binary is the gpuvet executable to copy ("": this one) and its GOARCH, from its ELF header.
func Binary(p string) (string, string, error) {
	if p == "" {
		self, err := os.Executable()
		if err != nil {
			return "", "", fmt.Errorf("cannot find this gpuvet binary to copy (%w): set ssh.binary", err)
		}
		p = self
	}
	f, err := elf.Open(p)
	if err != nil {
		return "", "", fmt.Errorf("ssh.binary %s: not a Linux executable (%w)", p, err)
	}
	defer f.Close()
	arch := map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_PPC64: "ppc64le", elf.EM_S390: "s390x"}[f.Machine]
	if arch == "" {
		return "", "", fmt.Errorf("ssh.binary %s: machine %v is not one gpuvet runs on", p, f.Machine)
	}
	return p, arch, nil
}

// PublicKey is the authorized_keys line of the key gpuvet logs in with: identity's (~ expanded)
// .pub file when set, else the agent's first key, else the first of OpenSSH's default key files
// (~/.ssh/id_ed25519, …) that exists. The opennebula backend puts it in each VM's context.
func PublicKey(identity, agentSocket string) (string, error) {
	if identity != "" {
		return publicKeyOf(IdentityFiles(identity)[0], "ssh.identity_file")
	}
	if agentSocket = cmp.Or(agentSocket, os.Getenv("SSH_AUTH_SOCK")); agentSocket != "" {
		if conn, err := net.Dial("unix", agentSocket); err == nil {
			defer conn.Close()
			if keys, err := agent.NewClient(conn).List(); err == nil && len(keys) > 0 {
				return strings.TrimSpace(keys[0].String()), nil
			}
		}
	}
	for _, f := range IdentityFiles("") {
		_, priv := os.Stat(f)
		if _, pub := os.Stat(f + ".pub"); priv == nil || pub == nil {
			return publicKeyOf(f, "default key")
		}
	}
	return "", fmt.Errorf("no SSH key to put in the VMs: set ssh.identity_file, load a key in ssh-agent, or make ~/.ssh/id_ed25519 (ssh-keygen -t ed25519)")
}

// publicKeyOf reads a key file's public half: its .pub beside it, else from the private key.
func publicKeyOf(file, what string) (string, error) {
	if b, err := os.ReadFile(file + ".pub"); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	k, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	s, err := gossh.ParsePrivateKey(k)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w (an encrypted key: load it in ssh-agent)", what, file, err)
	}
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(s.PublicKey()))), nil
}
