package config

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuvet/gpuvet/internal/backendkind"
)

// SSH configures backend ssh (gpuvet copied to each host, run there), and how opennebula reaches
// its VMs.
type SSH struct {
	// Hosts are the hosts to vet: ssh_config aliases, host names or addresses (--hosts h1,h2).
	Hosts []string `yaml:"hosts"`
	// Inventory is a YAML file listing hosts with per-host user, port, identity_file and set
	// (config overrides for that host's run); see docs/config.md.
	Inventory string `yaml:"inventory"`
	// User and Port apply when neither the inventory nor ~/.ssh/config say (default: the local
	// user, 22).
	User string `yaml:"user"`
	Port int    `yaml:"port"`
	// IdentityFile is a private key offered after the agent's keys (default: ~/.ssh/id_*).
	IdentityFile string `yaml:"identity_file"`
	ConfigFile   string `yaml:"config_file"` // ssh_config (default ~/.ssh/config)
	// KnownHosts is checked for every host key, always (default ~/.ssh/known_hosts): an unknown or
	// changed key fails that host.
	KnownHosts string `yaml:"known_hosts"`
	// Binary is the gpuvet copied to the hosts (default: this one); it must match their `uname -m`.
	Binary         string   `yaml:"binary"`
	RemoteDir      string   `yaml:"remote_dir"`     // the run's folder on each host (removed after)
	RemoteBackend  string   `yaml:"remote_backend"` // what the host runs: local or sim
	Parallel       int      `yaml:"parallel"`       // hosts at once
	ConnectTimeout Duration `yaml:"connect_timeout"`
}

// OpenNebula configures backend opennebula: VMs with GPU passthrough through the XML-RPC API.
type OpenNebula struct {
	Endpoint string `yaml:"endpoint"` // the XML-RPC URL, e.g. http://frontend:2633/RPC2
	// AuthEnv names the variable holding user:password, or a file's path holding it (as ONE_AUTH).
	AuthEnv  string   `yaml:"auth_env"`
	Clusters []string `yaml:"clusters"`   // names or ids; empty: every cluster
	VMPerGPU bool     `yaml:"vm_per_gpu"` // one VM per GPU, not one per host with all its GPUs
	// TemplateID instantiates this VM template (with the GPUs, sizing and SSH key added); -1:
	// allocate a VM from image and network below.
	TemplateID int    `yaml:"template_id"`
	Image      string `yaml:"image"`
	Network    string `yaml:"network"`
	VCPU       int    `yaml:"vcpu"`
	MemoryMB   int    `yaml:"memory_mb"`
	DiskMB     int    `yaml:"disk_mb"` // 0: the image's size
	// PinPolicy is the TOPOLOGY PIN_POLICY for a VM whose GPUs' NUMA node is unknown (a known node
	// gets NODE_AFFINITY instead: OpenNebula refuses both). Empty: none.
	PinPolicy string `yaml:"pin_policy"`
	// SSHUser and SSHPort log into the VMs (the key: ssh.identity_file, else the agent's first).
	SSHUser string `yaml:"ssh_user"`
	SSHPort int    `yaml:"ssh_port"`
	// BootTimeout bounds create → RUNNING with SSH; CleanupTimeout terminate → DONE before
	// recover-delete; Poll is the one.vm.info interval.
	BootTimeout    Duration `yaml:"boot_timeout"`
	CleanupTimeout Duration `yaml:"cleanup_timeout"`
	Poll           Duration `yaml:"poll"`
	Parallel       int      `yaml:"parallel"`
	// Baremetal first re-measures each node that gets VMs on the node itself: GPUs released from
	// vfio-pci, driver installed (host_prep), host pipeline over SSH (as ssh reaches the node's name,
	// root login), vfio-pci restored; the figures are the overhead table's baseline (docs/hostprep.md).
	Baremetal bool `yaml:"baremetal"`
	// BaremetalSet are key=value overrides for the nodes' own runs (as an inventory's set).
	BaremetalSet []string `yaml:"baremetal_set"`
}

func sshDefaults() SSH {
	return SSH{RemoteDir: "/tmp", RemoteBackend: "local", Parallel: 4, ConnectTimeout: Duration(15 * time.Second)}
}

func openNebulaDefaults() OpenNebula {
	return OpenNebula{AuthEnv: "ONE_AUTH", TemplateID: -1, VCPU: 16, MemoryMB: 65536, SSHUser: "root", SSHPort: 22,
		BootTimeout: Duration(15 * time.Minute), CleanupTimeout: Duration(5 * time.Minute), Poll: Duration(5 * time.Second), Parallel: 4}
}

// remoteChecks are the rules over ssh.* and opennebula.*.
func remoteChecks(c Config) []check {
	s, o := c.SSH, c.OpenNebula
	one := backendkind.UsesSection(c.Backend, "opennebula")
	return []check{
		{"ssh.hosts", backendkind.UsesSection(c.Backend, "ssh") && len(s.Hosts) == 0 && s.Inventory == "", "backend ssh needs hosts: --hosts h1,h2 or --inventory FILE"},
		{"ssh.hosts", badHost(s.Hosts) != "", badHost(s.Hosts)},
		{"ssh.port", s.Port < 0 || s.Port > 65535, "want a port 1..65535 (0: ssh_config's or 22)"},
		{"ssh.remote_backend", !slices.Contains(backendkind.RemoteNames(), s.RemoteBackend), "want " + backendkind.List(backendkind.RemoteNames())},
		{"ssh.remote_dir", len(s.RemoteDir) == 0 || s.RemoteDir[0] != '/', "want an absolute directory on the hosts, e.g. /tmp"},
		{"ssh.parallel", s.Parallel < 1, "want ≥ 1"},
		{"ssh.connect_timeout", s.ConnectTimeout <= 0, "want a positive duration"},
		{"opennebula.endpoint", one && o.Endpoint == "", "backend opennebula needs the XML-RPC URL: --endpoint http://frontend:2633/RPC2"},
		{"opennebula.auth_env", one && o.AuthEnv == "", "name the environment variable holding user:password (e.g. ONE_AUTH)"},
		{"opennebula.image", one && o.TemplateID < 0 && o.Image == "", "without template_id a VM is allocated from an image: set opennebula.image (and network), or template_id"},
		{"opennebula.vcpu", o.VCPU < 1, "want ≥ 1"},
		{"opennebula.memory_mb", o.MemoryMB < 512, "want ≥ 512 MB"},
		{"opennebula.disk_mb", o.DiskMB < 0, "want ≥ 0 (0: the image's size)"},
		{"opennebula.ssh_port", o.SSHPort < 1 || o.SSHPort > 65535, "want 1..65535"},
		{"opennebula.boot_timeout", o.BootTimeout <= 0, "want a positive duration"},
		{"opennebula.cleanup_timeout", o.CleanupTimeout <= 0, "want a positive duration"},
		{"opennebula.poll", o.Poll < Duration(10*time.Millisecond), "want ≥ 10ms"},
		{"opennebula.parallel", o.Parallel < 1, "want ≥ 1"},
		{"opennebula.baremetal", o.Baremetal && c.Run.Baseline != "", "the bare-metal re-measure is this run's baseline: drop run.baseline (--baseline), or opennebula.baremetal"},
		{"opennebula.baremetal", o.Baremetal && c.HostPrep.Enabled == "false", "the bare-metal re-measure needs host preparation (the driver, the vfio release): host_prep.enabled auto or true"},
		{"opennebula.pin_policy", !slices.Contains([]string{"", "NONE", "THREAD", "SHARED", "CORE"}, strings.ToUpper(o.PinPolicy)), fmt.Sprintf("want NONE, THREAD, SHARED or CORE (any case, or empty), got %q", o.PinPolicy)},
	}
}

// badHost says why a host of ssh.hosts is not a name ("" when all are): a user@ or :port would be
// dialled as part of the name and fail as an unreachable host, after the run started.
func badHost(hosts []string) string {
	for _, h := range hosts {
		user, rest, hasUser := strings.Cut(h, "@")
		if !hasUser {
			rest = h
		}
		_, port, hasPort := strings.Cut(rest, ":")
		if hasPort && net.ParseIP(strings.Trim(rest, "[]")) != nil {
			hasPort = false // an IPv6 address
		}
		switch {
		case hasUser && hasPort:
			return fmt.Sprintf("%q: --hosts takes names, ssh_config aliases or addresses; set the user and port apart: --set ssh.user=%s --set ssh.port=%s (or an ssh_config Host entry, or an inventory entry with user and port)", h, user, port)
		case hasUser:
			return fmt.Sprintf("%q: --hosts takes names, ssh_config aliases or addresses; set the user apart: --set ssh.user=%s (or an ssh_config Host entry, or an inventory entry's user)", h, user)
		case hasPort:
			return fmt.Sprintf("%q: --hosts takes names, ssh_config aliases or addresses; set the port apart: --set ssh.port=%s (or an ssh_config Host entry, or an inventory entry's port)", h, port)
		}
	}
	return ""
}

// RemoteYAML is the resolved plan as one YAML file for a host's own `gpuvet run`, with the backend
// the host runs, without what belongs to this machine only (the baseline, the fleet's settings).
func (p *Plan) RemoteYAML() ([]byte, error) {
	acc, _ := p.tree["accelerators"].(tree)
	return p.remoteYAML(p.Config, acc)
}

// ResolvedYAML is RemoteYAML for one host whose settings (c) were resolved here, without an
// accelerators section: applied again on the host, an entry would override what a flag set here.
func (p *Plan) ResolvedYAML(c Config) ([]byte, error) {
	c.Accelerators = nil
	return p.remoteYAML(c, nil)
}

// remoteYAML is c as the hosts' plan, with acc (the plan's tree) as its accelerators section.
func (p *Plan) remoteYAML(c Config, acc tree) ([]byte, error) {
	// Each host runs the backend its fleet's row names (ssh.remote_backend, slurm.remote_backend);
	// a fleet without hosts of its own (kubernetes) hands its pods the plan as ssh's hosts get it.
	c.Backend = c.SSH.RemoteBackend
	if backendkind.Of(p.Config.Backend).RemoteKey != "" {
		t, err := toTree(p.Config, "", map[string]string{})
		if err != nil {
			return nil, err
		}
		c.Backend = remoteBackend(t)
	}
	c.Run.Baseline, c.Run.SaveBaseline = "", false
	// The textfile is the merged run's, written here: a host's own run writes none of its own.
	c.Output.PrometheusFile = ""
	c.SSH, c.OpenNebula = sshDefaults(), openNebulaDefaults()
	// Nor the Kubernetes settings: they name this machine's kubeconfig, and a pod runs one node's part.
	c.Kubernetes = kubernetesDefaults()
	c.Slurm = slurmDefaults()
	// An accelerators entry travels as the keys it sets (the plan's tree), not as the Go struct:
	// its zero values (engine.kind "", …) would override every key on the host, which then refuses
	// the plan.
	var doc yaml.Node
	if err := doc.Encode(c); err != nil {
		return nil, err
	}
	if acc != nil {
		for i := 0; i+1 < len(doc.Content); i += 2 {
			if doc.Content[i].Value == "accelerators" {
				if err := doc.Content[i+1].Encode(acc); err != nil {
					return nil, err
				}
			}
		}
	}
	b, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, err
	}
	// The hosts would refuse a plan this one does not check (e.g. engine kind generic without a
	// command, which only the local backend needs): refuse it here, before any host is touched.
	q := &Plan{Sources: map[string]string{}}
	if q.tree, err = toTree(Defaults(), "default", q.Sources); err != nil {
		return nil, err
	}
	if err := q.applyBytes("hosts' plan", b); err != nil {
		return nil, err
	}
	rc, err := decode(q.tree)
	if err != nil {
		return nil, err
	}
	if err := validate(rc, p.Sources, "on the hosts ("+c.Backend+")"); err != nil {
		return nil, err
	}
	return b, nil
}
