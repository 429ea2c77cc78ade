package config

import (
	"regexp"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/backendkind"
)

// HostPrep is host preparation for the ssh backend (and the OpenNebula bare-metal node): what a host
// lacks (the NVIDIA driver, DCGM, numactl) is installed with apt for the run and purged after; what
// it had is never touched (docs/hostprep.md).
type HostPrep struct {
	// Enabled: auto (hosts that run the local backend, ssh.remote_backend local), true, false.
	Enabled string `yaml:"enabled"`
	// AllowDriverInstall installs the driver on a host without nvidia-smi; false fails such a host
	// before anything changes there.
	AllowDriverInstall bool `yaml:"allow_driver_install"`
	// AllowNumactlInstall does the same for numactl (needed by engine.numa_bind).
	AllowNumactlInstall bool `yaml:"allow_numactl_install"`
	// VFIORelease releases the host's NVIDIA GPUs from vfio-pci for its run, restored after (the
	// bare-metal re-measure of a KVM node with GPU passthrough). Needs root login.
	VFIORelease bool `yaml:"vfio_release"`
	// Driver, DCGM and Numactl are the apt packages installed, each with its version pin ("": the
	// repository's candidate, recorded). DCGM's permission is health.dcgm.allow_install.
	Driver  AptPackage `yaml:"driver"`
	DCGM    AptPackage `yaml:"dcgm"`
	Numactl AptPackage `yaml:"numactl"`
}

// AptPackage is one apt package with an optional exact version (as `apt-cache madison` lists it).
type AptPackage struct {
	Package string `yaml:"package"`
	Version string `yaml:"version"`
}

// Spec is "package" or "package=version", as apt-get install takes it.
func (p AptPackage) Spec() string {
	if p.Version == "" {
		return p.Package
	}
	return p.Package + "=" + p.Version
}

// The packages installed by default, as NVIDIA's CUDA repository names them: the open kernel driver
// (recommended from Turing on, required for Blackwell) and DCGM 4 for CUDA 13 (driver 580 on).
func hostPrepDefaults() HostPrep {
	return HostPrep{Enabled: "auto", AllowDriverInstall: true, AllowNumactlInstall: true,
		Driver: AptPackage{Package: "nvidia-open"}, DCGM: AptPackage{Package: "datacenter-gpu-manager-4-cuda13"},
		Numactl: AptPackage{Package: "numactl"}}
}

// On says whether hosts are prepared for this plan: auto prepares hosts whose own run is the local
// backend (a simulated run needs no driver).
func (h HostPrep) On(remoteBackend string) bool {
	switch h.Enabled {
	case "true":
		return true
	case "auto":
		return backendkind.Of(remoteBackend).ThisHost
	}
	return false
}

// Debian policy for package names; versions: [epoch:]upstream[-revision].
var (
	aptName    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	aptVersion = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~:-]*$`)
)

func hostPrepChecks(c Config) []check {
	h := c.HostPrep
	out := []check{{"host_prep.enabled", !slices.Contains([]string{"auto", "true", "false"}, h.Enabled), "want auto, true or false"},
		{"host_prep.vfio_release", h.VFIORelease && !h.On(c.SSH.RemoteBackend), "releasing GPUs from vfio-pci needs host preparation on (host_prep.enabled true, or auto with ssh.remote_backend local): the run needs the driver"}}
	for _, p := range []struct {
		key string
		p   AptPackage
	}{{"host_prep.driver", h.Driver}, {"host_prep.dcgm", h.DCGM}, {"host_prep.numactl", h.Numactl}} {
		out = append(out,
			check{p.key + ".package", !aptName.MatchString(p.p.Package), "want a Debian package name (lower case letters, digits, + - .), e.g. nvidia-open"},
			check{p.key + ".version", p.p.Version != "" && (!aptVersion.MatchString(p.p.Version) || strings.ContainsAny(p.p.Version, " '\"")),
				"want a version as `apt-cache madison PACKAGE` lists it (e.g. 580.159.04-1), or empty for the repository's candidate"})
	}
	return out
}
