package ssh

import (
	"bytes"
	"debug/elf"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
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
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("inventory: %v", err)
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
		return nil, fmt.Errorf("inventory %s: %v (want hosts: [{name, host, user, port, identity_file, gpus, set}])", file, err)
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

// Fleet is what every host of a run shares.
type Fleet struct {
	Config   config.SSH
	Plan     []byte // the plan as YAML (config.Plan.RemoteYAML)
	RunID    string
	Out      string // local output folder: each host's results go to OUT/hosts/NAME
	Manifest *fleet.Manifest
	// Progress receives each host's lines, already prefixed with its name.
	Progress func(line string)
}

// Options are the client settings from the config.
func OptionsFrom(c config.SSH) Options {
	o := Options{ConfigFile: c.ConfigFile, User: c.User, Port: c.Port, ConnectTimeout: c.ConnectTimeout.D(), IdentityFile: c.IdentityFile}
	if c.KnownHosts != "" {
		o.KnownHosts = []string{c.KnownHosts}
	}
	return o
}

// Hosts builds the fleet's hosts from ssh.hosts and the inventory.
func (f Fleet) Hosts() ([]*Host, error) {
	var inv []InventoryHost
	for _, h := range f.Config.Hosts {
		inv = append(inv, InventoryHost{Name: h})
	}
	if f.Config.Inventory != "" {
		more, err := ReadInventory(f.Config.Inventory)
		if err != nil {
			return nil, err
		}
		inv = append(inv, more...)
	}
	bin, arch, err := Binary(f.Config.Binary)
	if err != nil {
		return nil, err
	}
	opts := OptionsFrom(f.Config)
	seen := map[string]bool{}
	var out []*Host
	for _, ih := range inv {
		if seen[ih.Name] {
			return nil, fmt.Errorf("host %s is listed twice (ssh.hosts and the inventory)", ih.Name)
		}
		seen[ih.Name] = true
		t := Target{Name: ih.Name, Host: ih.Host, User: ih.User, Port: ih.Port}
		if ih.IdentityFile != "" {
			t.IdentityFiles = []string{expandHome(ih.IdentityFile)}
		}
		if t, err = Resolve(t, opts); err != nil {
			return nil, err
		}
		args := []string{"--backend", f.Config.RemoteBackend}
		if ih.GPUs > 0 {
			args = append(args, "--gpu-count", strconv.Itoa(ih.GPUs))
		}
		for _, s := range ih.Set {
			args = append(args, "--set", s)
		}
		name := ih.Name
		out = append(out, &Host{Target: t, Options: opts, Manifest: f.Manifest, Job: Job{
			Binary: bin, BinaryArch: arch, Plan: f.Plan, Args: args,
			RemoteDir: path.Join(f.Config.RemoteDir, "gpuvet-"+f.RunID+"-"+safe(name)),
			LocalOut:  filepath.Join(f.Out, "hosts", safe(name)),
			Progress:  func(l string) { f.say(name, l) },
		}})
	}
	return out, nil
}

func (f Fleet) say(host, line string) {
	if f.Progress != nil {
		f.Progress("[" + host + "] " + line)
	}
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// safe makes a host name usable in a file name.
func safe(name string) string { return unsafeChars.ReplaceAllString(name, "_") }

// Binary is the gpuvet executable to copy (path "" = this one) and its GOARCH, read from its ELF
// header.
func Binary(p string) (string, string, error) {
	if p == "" {
		self, err := os.Executable()
		if err != nil {
			return "", "", fmt.Errorf("cannot find this gpuvet binary to copy (%v): set ssh.binary", err)
		}
		p = self
	}
	f, err := elf.Open(p)
	if err != nil {
		return "", "", fmt.Errorf("ssh.binary %s: not a Linux executable (%v)", p, err)
	}
	defer f.Close()
	arch := map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_PPC64: "ppc64le", elf.EM_S390: "s390x"}[f.Machine]
	if arch == "" {
		return "", "", fmt.Errorf("ssh.binary %s: machine %v is not one gpuvet runs on", p, f.Machine)
	}
	return p, arch, nil
}

// PublicKey is the authorized_keys line of the key gpuvet logs in with: identity's .pub file when
// set, else the agent's first key. The opennebula backend puts it in each VM's context.
func PublicKey(identity, agentSocket string) (string, error) {
	if identity != "" {
		b, err := os.ReadFile(expandHome(identity) + ".pub")
		if err == nil {
			return strings.TrimSpace(string(b)), nil
		}
		k, perr := os.ReadFile(expandHome(identity))
		if perr != nil {
			return "", fmt.Errorf("ssh.identity_file: %v", perr)
		}
		s, perr := gossh.ParsePrivateKey(k)
		if perr != nil {
			return "", fmt.Errorf("ssh.identity_file %s: %v", identity, perr)
		}
		return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(s.PublicKey()))), nil
	}
	if agentSocket == "" {
		agentSocket = os.Getenv("SSH_AUTH_SOCK")
	}
	if agentSocket != "" {
		if conn, err := net.Dial("unix", agentSocket); err == nil {
			defer conn.Close()
			if keys, err := agent.NewClient(conn).List(); err == nil && len(keys) > 0 {
				return strings.TrimSpace(keys[0].String()), nil
			}
		}
	}
	return "", fmt.Errorf("no SSH key to put in the VMs: set ssh.identity_file or load a key in ssh-agent")
}
