package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/hostprep"
	"github.com/gpuvet/gpuvet/internal/hostprep/hostpreptest"
	"github.com/gpuvet/gpuvet/internal/opennebula/onetest"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/vfio/vfiotest"
)

// prepHost is a bare Debian host (no driver, DCGM or numactl; a local apt repository of stand-in
// NVIDIA packages) with its own sshd, trusted by the lab.
func (l *realLab) prepHost(t *testing.T, addr string) *hostpreptest.Host {
	t.Helper()
	h := hostpreptest.New(t, addr, hostpreptest.Options{Authorized: l.authorized, SetEnv: []string{"GPUVET_TEST_AS_GPUVET=1"}})
	l.trust(t, h.SSHD.KnownHostsLines())
	return h
}

// prepArgs vet h as an ssh host running the local backend: GPUs from the installed nvidia-smi's
// XML, DCGM's diagnostic through the installed dcgmi, the engine played by gpuvet's own simulator
// (the copied binary, `./gpuvet sim`, in the run's folder on the host).
func (l *realLab) prepArgs(h *hostpreptest.Host, out string, extra ...string) []string {
	a := []string{"run", "--out", out, "--backend", "ssh", "--hosts", h.SSHD.Host, "--set", "ssh.port=" + strconv.Itoa(h.SSHD.Port),
		"--set", "ssh.user=root", "--set", "ssh.identity_file=" + l.key, "--set", "ssh.known_hosts=" + l.knownHosts,
		"--set", "ssh.config_file=/dev/null", "--set", "ssh.remote_dir=/tmp", "--set", "ssh.remote_backend=local",
		"--set", "health.source=/usr/share/nvidia-standin/nvidia-smi-q-idle.xml", "--set", "health.gemm=false", "--set", "health.pcie=false",
		"--engine", "generic", "--engine-cmd", "./gpuvet sim --gpu H200 --model {model} --port {port} --max-model-len {max_model_len}",
		"--set", "engine.version_command=./gpuvet --version", "--set", "engine.port_base=" + strconv.Itoa(21000+int(h.SSHD.Host[len(h.SSHD.Host)-1])*10),
		"--set", "load.max_duration=1500ms", "--set", "load.rates=2", "--set", "load.prompt_tokens=64",
		"--set", "load.output_tokens=32", "--set", "load.max_concurrency=4", "--set", "health.burn=0s"}
	return append(a, extra...)
}

// A bare host vetted over real SSH with the local backend: the driver, DCGM and numactl are
// installed before its run, used by it (its GPUs are read from the installed driver's files), and
// purged after; the host's packages end as they began and the summary says what was done.
func TestRealSSHDHostPrepInstallUsePurge(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	l := newRealLab(t)
	h := l.prepHost(t, "127.0.0.45")
	before := h.Installed(t)
	out := filepath.Join(l.dir, "out")
	code, stdout, stderr := l.run(l.prepArgs(h, out))
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil || len(s.Hosts) != 1 {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	host := s.Hosts[0]
	if host.Status == results.StatusFailed || code > 1 {
		t.Fatalf("host failed (exit %d): %s\n%s", code, host.Error, stderr)
	}
	// The GPUs come from the XML the installed driver package put there (a capture source: DCGM's
	// diagnostic through the installed dcgmi and its engine is TestChrootBareHostInstallUsePurge's).
	if n := len(host.Discovery.GPUs); n != 1 || !strings.Contains(host.Discovery.GPUs[0].Name, "H200") {
		t.Fatalf("discovery from the installed driver's nvidia-smi XML: %+v", host.Discovery)
	}
	p := host.Prep
	if p == nil || !slices.Contains(p.Installed, "nvidia-open=580.159.04-1") || !slices.Contains(p.Installed, "datacenter-gpu-manager-4-cuda13=1:4.4.1-1") ||
		!slices.Contains(p.Installed, "numactl=2.0.16-1") || !slices.Contains(p.Started, "nv-hostengine") {
		t.Fatalf("host_prep record: %+v", p)
	}
	if len(p.Removed) != len(p.Installed)+len(p.Started) || len(p.Left) != 0 || !strings.HasPrefix(p.Autoremove, "ran") {
		t.Fatalf("host_prep cleanup: %+v", p)
	}
	if after := h.Installed(t); !maps.Equal(after, before) {
		t.Fatalf("the host's packages after the run differ from before:\nbefore %v\nafter  %v", before, after)
	}
	if ps := h.Procs("nv-hostengine"); len(ps) != 0 {
		t.Fatalf("nv-hostengine left running: %v", ps)
	}
	if !strings.Contains(stderr, "host prep: apt-get install") || !strings.Contains(stderr, "host prep: apt-get purge") {
		t.Fatalf("progress does not show the install and the purge:\n%s", stderr)
	}
	if ms, _ := filepath.Glob(filepath.Join(l.state, "*.json")); len(ms) != 0 {
		t.Fatalf("manifest left: %v", ms)
	}
}

// A controller killed with kill -9 mid-run leaves the packages it installed on the host, listed in
// the run manifest; `gpuvet clean` stops the remote run, collects its results, purges the packages
// and stops the engine it started: the host ends as it began.
func TestRealSSHDHostPrepKilledThenClean(t *testing.T) {
	t.Parallel()
	l := newRealLab(t)
	h := l.prepHost(t, "127.0.0.46")
	before := h.Installed(t)
	out := filepath.Join(l.dir, "out")
	cmd := l.cmd(l.prepArgs(h, out, "--set", "load.max_duration=30s")...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(240 * time.Second)
	for {
		if m, _ := filepath.Glob(filepath.Join(h.Root, "tmp", "gpuvet-*", "out", "summary.json")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, in the output
			time.Sleep(time.Second)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the remote run never started:\n%s", output.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if _, ok := h.Installed(t)["nvidia-open"]; !ok {
		t.Fatalf("the killed run had not installed the driver yet:\n%s", output.String())
	}
	ms, _ := filepath.Glob(filepath.Join(l.state, "ssh-*.json"))
	if len(ms) != 1 {
		t.Fatalf("manifests %v", ms)
	}
	m, err := fleet.ReadManifest(ms[0])
	if err != nil {
		t.Fatal(err)
	}
	var pkgs int
	for _, o := range m.Live() {
		if o.Kind == hostprep.KindPackage {
			pkgs++
		}
	}
	if pkgs != 7 {
		t.Fatalf("manifest lists %d packages, want the 7 installed: %+v", pkgs, m.Objects)
	}
	clean := l.cmd("clean", "--manifest", ms[0], "--set", "ssh.identity_file="+l.key, "--set", "ssh.known_hosts="+l.knownHosts, "--set", "ssh.config_file=/dev/null")
	got, err := clean.CombinedOutput()
	if err != nil {
		t.Fatalf("clean: %v\n%s", err, got)
	}
	for _, want := range []string{"removed ssh-dir", "removed apt-package nvidia-open=580.159.04-1", "removed dcgm-hostengine nv-hostengine", "removed apt-autoremove", "nothing left"} {
		if !strings.Contains(string(got), want) {
			t.Fatalf("clean output lacks %q:\n%s", want, got)
		}
	}
	if after := h.Installed(t); !maps.Equal(after, before) {
		t.Fatalf("after clean the host's packages differ from before:\nbefore %v\nafter  %v", before, after)
	}
	if ps := h.Procs("nv-hostengine"); len(ps) != 0 {
		t.Fatalf("nv-hostengine left running: %v", ps)
	}
	if ms, _ := filepath.Glob(filepath.Join(l.state, "*.json")); len(ms) != 0 {
		t.Fatalf("manifest left after clean: %v", ms)
	}
}

// vfioNode is a bare Debian host that is a virtualization node: a fake /sys/bus/pci tree with an
// H200 on vfio-pci (driverctl's override persisted) mounted on its /sys, Debian's real driverctl
// script in it, nvidia-persistenced running.
func (l *realLab) vfioNode(t *testing.T, addr string) (*hostpreptest.Host, *vfiotest.Node) {
	t.Helper()
	if _, err := os.Stat("/usr/sbin/driverctl"); err != nil {
		t.Skip("vfio node tests skipped: no /usr/sbin/driverctl (apt-get install driverctl)")
	}
	n := vfiotest.New(t, vfiotest.Options{}, "0000:41:00.0")
	h := hostpreptest.New(t, addr, hostpreptest.Options{Authorized: l.authorized, SetEnv: []string{"GPUVET_TEST_AS_GPUVET=1"},
		Binds: map[string]string{"/sys": n.Sys(), "/etc/driverctl.d": n.Conf()}})
	l.trust(t, h.SSHD.KnownHostsLines())
	n.InstallInto(h.Root)
	b, err := os.ReadFile("/usr/sbin/driverctl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.Root, "usr/local/sbin/driverctl"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	n.SetPersistenced(true)
	return h, n
}

func onVFIO(t *testing.T, n *vfiotest.Node, a string) {
	t.Helper()
	if n.Driver(a) != "vfio-pci" || n.Override(a) != "vfio-pci" || n.Persisted(a) != "vfio-pci" {
		t.Fatalf("%s: driver %q override %q persisted %q, want vfio-pci with driverctl's override\n%v", a, n.Driver(a), n.Override(a), n.Persisted(a), n.Log())
	}
}

// The bare-metal re-measure of a virtualization node over real SSH: its GPU is released from
// vfio-pci (override lifted), the driver installed, the GPU bound to nvidia, the host pipeline run,
// then the GPU goes back to vfio-pci with driverctl's persisted override before the driver is
// purged; persistenced, which ran before, runs again; the summary says each step.
func TestRealSSHDHostPrepVFIORelease(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	l := newRealLab(t)
	h, n := l.vfioNode(t, "127.0.0.47")
	before := h.Installed(t)
	out := filepath.Join(l.dir, "out")
	code, stdout, stderr := l.run(l.prepArgs(h, out, "--set", "host_prep.vfio_release=true"))
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil || len(s.Hosts) != 1 {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	host := s.Hosts[0]
	if host.Status == results.StatusFailed || code > 1 {
		t.Fatalf("host failed (exit %d): %s\n%s", code, host.Error, stderr)
	}
	onVFIO(t, n, "0000:41:00.0")
	if !n.PersistencedActive() {
		t.Fatal("nvidia-persistenced, which ran before, was not started again")
	}
	p := host.Prep
	if p == nil || p.RestoreError != "" {
		t.Fatalf("host_prep: %+v", p)
	}
	steps := strings.Join(p.VFIO, "\n")
	for _, want := range []string{"stopped nvidia-persistenced", "released 0000:41:00.0 from vfio-pci (override lifted)", "bound 0000:41:00.0 to nvidia",
		"restored 0000:41:00.0 to vfio-pci (persistent override)", "started nvidia-persistenced again"} {
		if !strings.Contains(steps, want) {
			t.Fatalf("vfio steps lack %q:\n%s", want, steps)
		}
	}
	log := strings.Join(n.Log(), " ")
	if strings.Contains(log, "WEDGED") || !strings.Contains(log, "bind:0000:41:00.0:nvidia") {
		t.Fatalf("kernel log: %s", log)
	}
	if after := h.Installed(t); !maps.Equal(after, before) {
		t.Fatalf("packages after the run differ from before")
	}
}

// A controller killed with kill -9 while the node's GPU is on nvidia: `gpuvet clean` puts it back
// on vfio-pci with its persisted override (before it purges the driver) from the manifest.
func TestRealSSHDHostPrepVFIOKilledThenClean(t *testing.T) {
	t.Parallel()
	l := newRealLab(t)
	h, n := l.vfioNode(t, "127.0.0.48")
	before := h.Installed(t)
	out := filepath.Join(l.dir, "out")
	cmd := l.cmd(l.prepArgs(h, out, "--set", "host_prep.vfio_release=true", "--set", "load.max_duration=30s")...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(240 * time.Second)
	for {
		if m, _ := filepath.Glob(filepath.Join(h.Root, "tmp", "gpuvet-*", "out", "summary.json")); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the remote run never started:\n%s", output.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if n.Driver("0000:41:00.0") != "nvidia" {
		t.Fatalf("the killed run's GPU is on %q, want nvidia", n.Driver("0000:41:00.0"))
	}
	ms, _ := filepath.Glob(filepath.Join(l.state, "ssh-*.json"))
	if len(ms) != 1 {
		t.Fatalf("manifests %v", ms)
	}
	clean := l.cmd("clean", "--manifest", ms[0], "--set", "ssh.identity_file="+l.key, "--set", "ssh.known_hosts="+l.knownHosts, "--set", "ssh.config_file=/dev/null")
	got, err := clean.CombinedOutput()
	if err != nil {
		t.Fatalf("clean: %v\n%s", err, got)
	}
	if !strings.Contains(string(got), "restored 0000:41:00.0 to vfio-pci (persistent override)") || !strings.Contains(string(got), "removed vfio-binding 0000:41:00.0") {
		t.Fatalf("clean output:\n%s", got)
	}
	onVFIO(t, n, "0000:41:00.0")
	if !n.PersistencedActive() {
		t.Fatal("nvidia-persistenced not started again by clean")
	}
	if after := h.Installed(t); !maps.Equal(after, before) {
		t.Fatalf("packages after clean differ from before")
	}
}

// opennebula.baremetal end to end: a fake OpenNebula front-end whose node1 is a real Debian node
// over real SSH (a fake /sys/bus/pci with its H200 on vfio-pci, Debian's driverctl) and whose VM is a
// real sshd. Before any VM, the node's GPU is released, the driver installed, the host pipeline run
// there, vfio-pci restored and the driver purged; then the VM runs, and the overhead table compares
// it against the node's fresh figures.
func TestRealSSHDOpenNebulaBaremetal(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	l := newRealLab(t)
	h, n := l.vfioNode(t, "127.0.0.49")
	before := h.Installed(t)
	if err := os.MkdirAll(filepath.Join(h.Root, l.remote), 0o755); err != nil { // ssh.remote_dir, on the node too
		t.Fatal(err)
	}
	vm := l.start(t, "127.0.0.50")
	one := &onetest.Server{Auth: "oneadmin:pw", Hosts: []onetest.Host{
		{ID: 0, Name: "node1", Cluster: "gpu", State: 2, PCI: []onetest.PCI{onetest.GPU("41:00.0", 0)}},
	}, IPFor: func(string, int) string { return "127.0.0.50" }, TerminateSteps: 2}
	onetest.Start(one)
	t.Cleanup(one.Close)
	l.env = append(l.env, "ONE_AUTH="+one.Auth)
	cfg := filepath.Join(l.dir, "ssh_config")
	os.WriteFile(cfg, []byte(fmt.Sprintf("Host node1\n  HostName %s\n  Port %d\n  User root\n", h.SSHD.Host, h.SSHD.Port)), 0o600)
	conf := filepath.Join(l.dir, "baremetal.yaml")
	os.WriteFile(conf, []byte(`opennebula:
  baremetal: true
  baremetal_set:
    - health.source=/usr/share/nvidia-standin/nvidia-smi-q-idle.xml
    - health.gemm=false
    - health.pcie=false
    - engine.kind=generic
    - engine.command=./gpuvet sim --gpu H200 --model {model} --port {port} --max-model-len {max_model_len}
    - engine.version_command=./gpuvet --version
    - engine.port_base=21490
`), 0o644)
	out := filepath.Join(l.dir, "out")
	args := append(l.args(out), "-c", conf, "--backend", "opennebula", "--endpoint", one.URL, "--set", "opennebula.template_id=5",
		"--set", "opennebula.ssh_port="+strconv.Itoa(vm.Port), "--set", "opennebula.poll=20ms", "--set", "ssh.config_file="+cfg, "--set", "sim.gpus=1")
	code, stdout, stderr := l.run(args)
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil || len(s.Hosts) != 1 {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	host := s.Hosts[0]
	if code > 1 || host.Status == results.StatusFailed || len(host.VMs) != 1 || !host.VMs[0].Terminated {
		t.Fatalf("exit %d, host %s %q %+v\n%s", code, host.Status, host.Error, host.VMs, stderr)
	}
	onVFIO(t, n, "0000:41:00.0")
	// Before any VM: the node's restore comes before the VM's provisioning.
	restored, provisioned := strings.Index(stderr, "restored 0000:41:00.0 to vfio-pci"), strings.Index(stderr, "s] node1: provision") // the VM's, not "bare-metal node1: provision"
	if restored < 0 || provisioned < 0 || restored > provisioned {
		t.Fatalf("the node's vfio restore (at %d) is not before the VM's provisioning (at %d):\n%s", restored, provisioned, stderr)
	}
	if host.Prep == nil || !slices.Contains(host.Prep.Installed, "nvidia-open=580.159.04-1") || len(host.Prep.VFIO) == 0 {
		t.Fatalf("host_prep of the node %q: %+v\n%s", host.Name, host.Prep, stderr)
	}
	if after := h.Installed(t); !maps.Equal(after, before) {
		t.Fatal("the node's packages after the run differ from before")
	}
	b := s.Baseline
	if b == nil || !strings.HasSuffix(b.BaselineFile, filepath.Join("baremetal", "baseline.json")) || len(b.Rows) == 0 {
		t.Fatalf("no overhead table against the node's fresh figures: %+v", b)
	}
	// The nodes' run is a fleet run of its own (fleet.Nested): merged and judged under this run's
	// id, the node named as OpenNebula names it; the baseline holds the node whose run finished.
	nested, err := results.Read(filepath.Join(out, "baremetal", "summary.json"))
	if err != nil || nested.RunID != s.RunID || len(nested.Hosts) != 1 || nested.Hosts[0].Name != "node1" || nested.Hosts[0].Status == "" ||
		nested.Environment != "baremetal" || nested.Fleet == nil || !nested.Complete {
		t.Fatalf("the nodes' summary: %v %+v", err, nested)
	}
	base, err := results.Read(b.BaselineFile)
	if err != nil || len(base.Hosts) != 1 || base.Hosts[0].Name != "node1" || base.Hosts[0].Status == results.StatusFailed {
		t.Fatalf("baseline %s: %v %+v", b.BaselineFile, err, base)
	}
	if len(one.Live()) != 0 {
		t.Fatalf("VMs left %+v", one.Live())
	}
}
