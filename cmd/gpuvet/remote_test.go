package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuvet/gpuvet/internal/opennebula/onetest"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/ssh/sshtest"
)

// quickSim is the short simulator profile the remote runs use.
var quickSim = []string{"--set", "load.max_duration=1500ms", "--set", "load.rates=2", "--set", "load.prompt_tokens=64",
	"--set", "load.output_tokens=32", "--set", "load.max_concurrency=4", "--set", "health.burn=0s", "--set", "ssh.remote_backend=sim"}

// sshLab is a set of fake hosts: SSH servers on loopback that run commands in their own folder,
// with this test binary standing in for the gpuvet binary it copies.
type sshLab struct {
	dir, key, knownHosts, state string
	pubKey                      gossh.PublicKey
	env                         []string // what its runs and hosts get in their environment (parallel tests each their own)
}

func newSSHLab(t *testing.T) *sshLab {
	t.Helper()
	dir := t.TempDir()
	lab := &sshLab{dir: dir, key: filepath.Join(dir, "id_ed25519"), knownHosts: filepath.Join(dir, "known_hosts"), state: filepath.Join(dir, "state")}
	var err error
	if lab.pubKey, err = sshtest.NewKey(lab.key); err != nil {
		t.Fatal(err)
	}
	lab.env = []string{"GPUVET_STATE_DIR=" + lab.state, "SSH_AUTH_SOCK="}
	if err := os.Mkdir(filepath.Join(dir, "remote"), 0o755); err != nil {
		t.Fatal(err)
	}
	return lab
}

// host starts one fake host on addr; trusted adds its key to known_hosts.
func (lab *sshLab) host(t *testing.T, name, addr string, trusted bool) *sshtest.Server {
	t.Helper()
	d := filepath.Join(lab.dir, "host-"+name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := sshtest.StartAt(addr, d, lab.pubKey)
	if err != nil {
		t.Fatal(err)
	}
	srv.Env = append([]string{"GPUVET_TEST_AS_GPUVET=1"}, lab.env...)
	t.Cleanup(srv.Close)
	line := srv.KnownHostsLine(nil)
	if !trusted { // a key that is not the host's: a changed host key
		other, err := sshtest.NewKey(filepath.Join(lab.dir, "other-"+name))
		if err != nil {
			t.Fatal(err)
		}
		line = srv.KnownHostsLine(other)
	}
	f, err := os.OpenFile(lab.knownHosts, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, line)
	f.Close()
	return srv
}

func (lab *sshLab) args(out string) []string {
	return append([]string{"run", "--out", out, "--set", "ssh.identity_file=" + lab.key, "--set", "ssh.known_hosts=" + lab.knownHosts,
		"--set", "ssh.config_file=/dev/null", "--set", "ssh.remote_dir=" + filepath.Join(lab.dir, "remote"),
		"--set", "sim.gpus=2"}, quickSim...)
}

func TestRunSSHFleetFlagsSlowHostAndRecordsFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	lab := newSSHLab(t)
	h1 := lab.host(t, "h1", "127.0.0.1:0", true)
	h2 := lab.host(t, "h2", "127.0.0.1:0", true)
	bad := lab.host(t, "imposter", "127.0.0.1:0", false)
	inv := filepath.Join(lab.dir, "inventory.yaml")
	os.WriteFile(inv, []byte(fmt.Sprintf(`hosts:
  - {name: h1, host: 127.0.0.1, port: %d}
  - {name: h2, host: 127.0.0.1, port: %d, set: ["sim.straggler=0", "sim.straggler_pct=60"]}
  - {name: imposter, host: 127.0.0.1, port: %d}
  - {name: down, host: 127.0.0.1, port: 1}
`, h1.Port(), h2.Port(), bad.Port())), 0o644)
	out := filepath.Join(lab.dir, "out")
	code, stdout, stderr := lab.run(append(lab.args(out), "--backend", "ssh", "--inventory", inv, "--set", "ssh.parallel=4"))
	if code != exitFailed { // two hosts failed: exit 1, after the others ran
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]results.Host{}
	for _, h := range s.Hosts {
		byName[h.Name] = h
	}
	if h := byName["h1"]; h.Status == results.StatusFailed || len(h.Models) == 0 || len(h.Models[0].Endpoints) != 2 {
		t.Fatalf("h1: %s %s\n%s", h.Status, h.Error, stderr)
	}
	// The microbenchmarks are the robust signal on a loaded machine (latencies jitter, and the short
	// load is under the sample guards): h2, with GPU 0 at 0.4 speed, is 30 % below h1 (beyond the
	// 25 % GEMM tolerance); h1 is never below h2.
	slowOnThroughput := func(h results.Host) bool {
		for _, f := range h.Flags {
			if f.Check == "compare.node_to_node" && strings.Contains(f.Reason, "health: gemm_bf16") {
				return true
			}
		}
		return false
	}
	if !slowOnThroughput(byName["h2"]) {
		t.Fatalf("h2 (GPU 0 at 0.4 speed) not flagged node to node: %+v", byName["h2"].Flags)
	}
	if slowOnThroughput(byName["h1"]) {
		t.Fatalf("h1 flagged: %+v", byName["h1"].Flags)
	}
	if h := byName["imposter"]; h.Status != results.StatusFailed || !strings.Contains(h.Error, "does not match known_hosts") {
		t.Fatalf("imposter: %s %q", h.Status, h.Error)
	}
	if h := byName["down"]; h.Status != results.StatusFailed || !strings.Contains(h.Error, "unreachable") {
		t.Fatalf("down: %s %q", h.Status, h.Error)
	}
	if !strings.Contains(stderr, "[h2] ") {
		t.Fatalf("no progress prefixed with the host name:\n%s", stderr)
	}
	for _, srv := range []*sshtest.Server{h1, h2, bad} {
		if f := srv.Files(); len(f) != 0 {
			t.Fatalf("left in %s: %v", srv.Dir, f)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(lab.dir, "remote")); len(left) != 0 {
		t.Fatalf("remote run folders left: %v", left)
	}
	if m, _ := os.ReadDir(lab.state); len(m) != 0 {
		t.Fatalf("manifest left: %v", m)
	}
	if _, err := os.Stat(filepath.Join(out, "hosts", "h1", "summary.json")); err != nil {
		t.Fatalf("h1's own results not collected: %v", err)
	}
}

// oneLab is a fake OpenNebula with 2 hosts × 2 GPUs whose VMs are SSH test servers on
// 127.0.0.N:port (every VM on the same port, as sshd on 22).
func oneLab(t *testing.T, lab *sshLab, s *onetest.Server) (*onetest.Server, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for i := 2; i < 6; i++ {
		lab.host(t, "vm"+strconv.Itoa(i), fmt.Sprintf("127.0.0.%d:%d", i, port), true)
	}
	var mu sync.Mutex
	next := 2
	s.IPFor = func(string, int) string {
		mu.Lock()
		defer mu.Unlock()
		next++
		return fmt.Sprintf("127.0.0.%d", next-1)
	}
	s.Auth = "oneadmin:pw-never-logged"
	s.Hosts = []onetest.Host{
		{ID: 0, Name: "node1", Cluster: "gpu", State: 2, PCI: []onetest.PCI{onetest.GPU("41:00.0", 0), onetest.GPU("c1:00.0", 1)}},
		{ID: 1, Name: "node2", Cluster: "gpu", State: 2, PCI: []onetest.PCI{onetest.GPU("41:00.0", 0), onetest.GPU("c1:00.0", 1)}},
		{ID: 2, Name: "cpu1", Cluster: "cpu", State: 2},
	}
	onetest.Start(s)
	t.Cleanup(s.Close)
	lab.env = append(lab.env, "ONE_AUTH="+s.Auth)
	return s, port
}

// bareMetal runs the ssh backend over node1 and node2 (2 simulated GPUs each) with --save-baseline
// and returns the baseline file: the reference a VM run of the same hosts is compared with.
func bareMetal(t *testing.T, lab *sshLab) string {
	t.Helper()
	n1, n2 := lab.host(t, "node1", "127.0.0.1:0", true), lab.host(t, "node2", "127.0.0.1:0", true)
	inv := filepath.Join(lab.dir, "baremetal.yaml")
	os.WriteFile(inv, []byte(fmt.Sprintf("hosts:\n  - {name: node1, host: 127.0.0.1, port: %d}\n  - {name: node2, host: 127.0.0.1, port: %d}\n", n1.Port(), n2.Port())), 0o644)
	out := filepath.Join(lab.dir, "baremetal")
	if code, stdout, stderr := lab.run(append(lab.args(out), "--backend", "ssh", "--inventory", inv, "--save-baseline")); code != exitOK {
		t.Fatalf("bare-metal run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	return filepath.Join(out, "baseline.json")
}

func TestRunOpenNebulaVMPerGPU(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	lab := newSSHLab(t)
	baseline := bareMetal(t, lab)
	one, port := oneLab(t, lab, &onetest.Server{})
	out := filepath.Join(lab.dir, "out")
	args := append(lab.args(out), "--backend", "opennebula", "--endpoint", one.URL, "--set", "opennebula.template_id=5",
		"--set", "opennebula.vm_per_gpu=true", "--set", "opennebula.ssh_port="+strconv.Itoa(port), "--set", "opennebula.poll=20ms",
		"--set", "opennebula.parallel=4", "--set", "sim.gpus=1", "--baseline", baseline)
	code, stdout, stderr := lab.run(args)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Environment != "vm" || len(s.Hosts) != 2 {
		t.Fatalf("environment %q, %d hosts", s.Environment, len(s.Hosts))
	}
	for _, h := range s.Hosts {
		if h.Status == results.StatusFailed || len(h.VMs) != 2 || len(h.Models) != 1 || len(h.Models[0].Endpoints) != 2 {
			t.Fatalf("%s: %s %q vms %d", h.Name, h.Status, h.Error, len(h.VMs))
		}
		for i, v := range h.VMs {
			if !v.Terminated || v.NUMANode == nil || *v.NUMANode != v.GPUs[0] || v.ProvisionS <= 0 || v.GPUs[0] != i {
				t.Fatalf("%s VM %+v", h.Name, v)
			}
		}
	}
	if s.Fleet == nil || len(s.Fleet.Skipped) != 1 || s.Fleet.Skipped[0].Name != "cluster cpu" {
		t.Fatalf("skipped: %+v", s.Fleet)
	}
	if len(one.VMs()) != 4 || len(one.Live()) != 0 {
		t.Fatalf("%d VMs made, left %+v", len(one.VMs()), one.Live())
	}
	for _, v := range one.VMs() {
		if !strings.Contains(v.Template, "NODE_AFFINITY") || strings.Contains(v.Template, "PIN_POLICY") {
			t.Fatalf("template:\n%s", v.Template)
		}
	}
	b, _ := json.Marshal(s)
	if strings.Contains(string(b)+stdout+stderr, "pw-never-logged") {
		t.Fatal("the OpenNebula password reached the summary or the log")
	}
	if m, _ := os.ReadDir(lab.state); len(m) != 0 {
		t.Fatalf("manifest left: %v", m)
	}
	if left, _ := os.ReadDir(filepath.Join(lab.dir, "remote")); len(left) != 0 {
		t.Fatalf("run folders left in the VMs: %v", left)
	}
	// The overhead table: host by host, GPU by GPU, against the bare-metal run of the same hosts.
	if s.Baseline == nil || len(s.Baseline.Rows) == 0 || s.Baseline.Environments[0] != "vm" {
		t.Fatalf("no baseline comparison: %+v", s.Baseline)
	}
	seen := map[string]bool{}
	for _, r := range s.Baseline.Rows {
		if _, ok := r.Values["vm"]; ok {
			seen[r.Subject] = true
		}
	}
	for _, subj := range []string{"node1: Qwen/Qwen3-8B gpu 0", "node1: Qwen/Qwen3-8B gpu 1", "node2: Qwen/Qwen3-8B gpu 1"} {
		if !seen[subj] {
			t.Fatalf("no overhead for %s: %v", subj, seen)
		}
	}
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil || !strings.Contains(string(html), "Virtualization overhead vs bare-metal baseline") || !strings.Contains(string(html), "node2: Qwen/Qwen3-8B gpu 1") ||
		!strings.Contains(string(html), "(PCI c1:00.0), NODE_AFFINITY 1, provisioned in") {
		t.Fatalf("the report lacks the overhead table (%v)", err)
	}
}

func TestRunOpenNebulaFailedInstantiateIsNotFatal(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	lab := newSSHLab(t)
	one, port := oneLab(t, lab, &onetest.Server{FailCreateOn: map[int]string{1: "Cannot dispatch VM: PCI device 41:00.0 is in use"}})
	out := filepath.Join(lab.dir, "out")
	code, _, stderr := lab.run(append(lab.args(out), "--backend", "opennebula", "--endpoint", one.URL, "--set", "opennebula.template_id=5",
		"--set", "opennebula.ssh_port="+strconv.Itoa(port), "--set", "opennebula.poll=20ms"))
	if code != exitFailed {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	s, _ := results.Read(filepath.Join(out, "summary.json"))
	if s == nil || len(s.Hosts) != 2 || s.Hosts[0].Status == results.StatusFailed || !strings.Contains(s.Hosts[1].Error, "PCI device 41:00.0 is in use") {
		t.Fatalf("summary hosts: %+v", s)
	}
	if len(one.Live()) != 0 {
		t.Fatalf("left %+v", one.Live())
	}
}

func TestKilledOpenNebulaRunThenClean(t *testing.T) {
	t.Parallel()
	lab := newSSHLab(t)
	one, port := oneLab(t, lab, &onetest.Server{StuckOn: map[int]bool{1: true}})
	out := filepath.Join(lab.dir, "out")
	cmd := lab.cmd(append(lab.args(out), "--backend", "opennebula", "--endpoint", one.URL, "--set", "opennebula.template_id=5",
		"--set", "opennebula.ssh_port="+strconv.Itoa(port), "--set", "opennebula.poll=20ms")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once both VMs exist (node2's is stuck in BOOT) and node1's run has measured something.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(lab.dir, "remote", "*", "out", "summary.json")); len(one.VMs()) == 2 && len(m) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if len(one.Live()) == 0 {
		t.Fatal("the test killed gpuvet too late: no VM left to clean")
	}
	// The manifest's front-end is not trusted with $ONE_AUTH until the config names it too.
	calls := len(one.Calls)
	refused := lab.cmd("clean")
	if b, err := refused.CombinedOutput(); err == nil || !strings.Contains(string(b), "confirm it with --set opennebula.endpoint="+one.URL) || len(one.Calls) != calls {
		t.Fatalf("clean without the endpoint confirmed: %v, %d calls sent\n%s", err, len(one.Calls)-calls, b)
	}
	clean := lab.cmd("clean")
	clean.Env = append(clean.Env, "GPUVET_OPENNEBULA_POLL=20ms", "GPUVET_OPENNEBULA_ENDPOINT="+one.URL)
	b, err := clean.CombinedOutput()
	if err != nil {
		t.Fatalf("clean: %v\n%s", err, b)
	}
	if live := one.Live(); len(live) != 0 {
		t.Fatalf("clean left VMs %+v\n%s", live, b)
	}
	// node1's VM run was measuring: clean collected what it had before the VM went.
	if got, _ := filepath.Glob(filepath.Join(out, "hosts", "*node1*", "summary.json")); len(got) != 1 {
		t.Fatalf("the VM's partial results were not collected before it was terminated:\n%s", b)
	}
	if left, _ := os.ReadDir(filepath.Join(lab.dir, "remote")); len(left) != 0 {
		t.Fatalf("run folders left: %v\n%s", left, b)
	}
	if m, _ := os.ReadDir(lab.state); len(m) != 0 {
		t.Fatalf("manifest left after clean: %v", m)
	}
	again := lab.cmd("clean")
	if b, err := again.CombinedOutput(); err != nil {
		t.Fatalf("second clean: %v\n%s", err, b)
	}
}

// run runs gpuvet as its own process with the lab's environment and returns its exit code,
// stdout and stderr.
func (lab *sshLab) run(args []string) (int, string, string) { return runProcess(lab.env, args) }

// cmd is gpuvet as its own process with the lab's environment.
func (lab *sshLab) cmd(args ...string) *exec.Cmd {
	cmd := gpuvet(args...)
	cmd.Env = append(cmd.Env, lab.env...)
	return cmd
}

// runProcess runs gpuvet as its own process with env added to this one's, and returns its exit code,
// stdout and stderr: tests that each set their own environment can run in parallel.
func runProcess(env, args []string) (int, string, string) {
	cmd := gpuvet(args...)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	} else if err != nil {
		return -1, stdout.String(), stderr.String() + err.Error()
	}
	return 0, stdout.String(), stderr.String()
}

func TestKilledSSHRunThenCleanManifest(t *testing.T) {
	t.Parallel()
	lab := newSSHLab(t)
	h1 := lab.host(t, "h1", "127.0.0.1:0", true)
	out := filepath.Join(lab.dir, "out")
	cmd := lab.cmd(append(lab.args(out), "--backend", "ssh", "--hosts", "127.0.0.1", "--set", "ssh.port="+strconv.Itoa(h1.Port()),
		"--set", "load.max_duration=30s")...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(lab.dir, "remote")
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if ents, _ := filepath.Glob(filepath.Join(remote, "*", "out", "summary.json")); len(ents) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	left, _ := os.ReadDir(remote)
	ms, _ := filepath.Glob(filepath.Join(lab.state, "ssh-*.json"))
	if len(left) == 0 || len(ms) != 1 {
		t.Fatalf("the test killed gpuvet too late or too early: remote %v, manifests %v; its output:\n%s", left, ms, output.String())
	}
	clean := lab.cmd("clean", "--manifest", ms[0], "--set", "ssh.identity_file="+lab.key, "--set", "ssh.known_hosts="+lab.knownHosts, "--set", "ssh.config_file=/dev/null")
	b, err := clean.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "removed ssh-dir") {
		t.Fatalf("clean: %v\n%s", err, b)
	}
	if left, _ := os.ReadDir(remote); len(left) != 0 {
		t.Fatalf("clean left %v\n%s", left, b)
	}
	if _, err := os.Stat(ms[0]); err == nil {
		t.Fatal("the manifest is still there")
	}
}

// oneArgs is a VM run on oneLab's fake front-end.
func oneArgs(lab *sshLab, out, url string, port int, more ...string) []string {
	return append(append(lab.args(out), "--backend", "opennebula", "--endpoint", url, "--set", "opennebula.template_id=5",
		"--set", "opennebula.ssh_port="+strconv.Itoa(port), "--set", "opennebula.poll=20ms"), more...)
}

// Item 2: a VM that sees fewer GPUs than were passed through fails: the count travels with the
// plan (health.expect_gpus) and a shortfall fails the host.
func TestRunOpenNebulaVMSeesFewerGPUsFails(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	lab := newSSHLab(t)
	one, port := oneLab(t, lab, &onetest.Server{})
	out := filepath.Join(lab.dir, "out")
	// One VM per host with both GPUs attached; the simulator inside shows one.
	code, stdout, stderr := lab.run(oneArgs(lab, out, one.URL, port, "--set", "sim.gpus=1"))
	if code != exitFailed {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s, _ := results.Read(filepath.Join(out, "summary.json"))
	if s == nil || len(s.Hosts) != 2 {
		t.Fatalf("summary %+v", s)
	}
	for _, h := range s.Hosts {
		if h.Status != results.StatusFailed || !strings.Contains(h.Error, "shows 1 GPU(s), 2 expected") {
			t.Fatalf("%s: %s %q", h.Name, h.Status, h.Error)
		}
		if h.Health == nil || h.Health.ExpectGPUs != 2 {
			t.Fatalf("%s: the VM's own health phase did not get health.expect_gpus=2: %+v", h.Name, h.Health)
		}
	}
	if len(one.Live()) != 0 {
		t.Fatalf("left %+v", one.Live())
	}
}

// Item 6: two runs started at once share nothing: run ids, manifests, VM names, run folders.
func TestRunOpenNebulaTwoConcurrentRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	lab := newSSHLab(t)
	one, port := oneLab(t, lab, &onetest.Server{})
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := range 2 {
		out := filepath.Join(lab.dir, fmt.Sprintf("out%d", i))
		// One VM per run, on its own host: the two runs' 2 VMs are up at the same time.
		c := lab.cmd(oneArgs(lab, out, one.URL, port, "--set", "sim.gpus=2", "--set", "opennebula.clusters=gpu", "--set", "opennebula.parallel=1")...)
		var b bytes.Buffer
		c.Stdout, c.Stderr = &b, &b
		cmds, outs = append(cmds, c), append(outs, &b)
	}
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, outs[i])
		}
	}
	names := map[string]bool{}
	for _, v := range one.VMs() {
		if names[v.Name] {
			t.Fatalf("two VMs named %s", v.Name)
		}
		names[v.Name] = true
	}
	if len(one.Live()) != 0 {
		t.Fatalf("left %+v", one.Live())
	}
	ids := map[string]bool{}
	for i := range 2 {
		s, err := results.Read(filepath.Join(lab.dir, fmt.Sprintf("out%d", i), "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		ids[s.RunID] = true
		// Each run made its own VMs (a host whose GPUs the other run held is skipped, as
		// OpenNebula's monitoring says they are attached).
		mine := 0
		for n := range names {
			if strings.HasPrefix(n, "gpuvet-"+s.RunID+"-") {
				mine++
			}
		}
		if mine == 0 || mine != len(s.Hosts) {
			t.Fatalf("run %s: %d VMs of its own for %d hosts (VMs %v)", s.RunID, mine, len(s.Hosts), names)
		}
		for _, h := range s.Hosts {
			if h.Status == results.StatusFailed {
				t.Fatalf("run %d host %s failed: %s", i, h.Name, h.Error)
			}
		}
	}
	if len(ids) != 2 {
		t.Fatalf("the two runs share a run id: %v", ids)
	}
	if m, _ := os.ReadDir(lab.state); len(m) != 0 {
		t.Fatalf("manifest left: %v", m)
	}
}

// Item 8: a VM that ignores terminate-hard is recover-deleted within opennebula.cleanup_timeout,
// and reported as terminated, not left over; the password of a user:password@ endpoint is
// recorded nowhere (item 10).
func TestRunOpenNebulaStuckVMRecoverDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	lab := newSSHLab(t)
	one, port := oneLab(t, lab, &onetest.Server{IgnoreTerminate: true})
	out := filepath.Join(lab.dir, "out")
	url := strings.Replace(one.URL, "http://", "http://proxyuser:url-pw-never-logged@", 1)
	code, stdout, stderr := lab.run(oneArgs(lab, out, url, port, "--set", "opennebula.cleanup_timeout=1s", "--set", "opennebula.clusters=gpu"))
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s, _ := results.Read(filepath.Join(out, "summary.json"))
	for _, h := range s.Hosts {
		for _, v := range h.VMs {
			if !v.Terminated {
				t.Fatalf("%s VM %+v not terminated", h.Name, v)
			}
		}
	}
	if len(one.Live()) != 0 || !slices.Contains(one.Calls, "one.vm.recover") {
		t.Fatalf("left %+v, calls %v", one.Live(), one.Calls)
	}
	for _, f := range []string{"summary.json", "report.html"} {
		b, _ := os.ReadFile(filepath.Join(out, f))
		if len(b) == 0 || strings.Contains(string(b), "url-pw-never-logged") {
			t.Fatalf("%s holds the endpoint's password (or is empty)", f)
		}
	}
	if strings.Contains(stdout+stderr, "url-pw-never-logged") {
		t.Fatal("the endpoint's password reached the output")
	}
}

// Item 8: `gpuvet clean` terminates a killed run's VMs in parallel, its polls paced by the VMs
// (a front-end whose terminate takes a few polls), not one poll interval after another.
func TestCleanOpenNebulaVMsInParallel(t *testing.T) {
	t.Parallel()
	lab := newSSHLab(t)
	one, port := oneLab(t, lab, &onetest.Server{StuckOn: map[int]bool{0: true, 1: true}, TerminateSteps: 2})
	cmd := lab.cmd(oneArgs(lab, filepath.Join(lab.dir, "out"), one.URL, port, "--set", "opennebula.vm_per_gpu=true", "--set", "opennebula.parallel=4")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(one.VMs()) < 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if len(one.Live()) != 4 {
		t.Fatalf("want 4 VMs left by the killed run, got %d", len(one.Live()))
	}
	// With a 3 s poll, one VM after another takes at least 4 × 3 s; in parallel with paced polls,
	// well under one interval per VM.
	start := time.Now()
	clean := lab.cmd("clean", "--set", "opennebula.endpoint="+one.URL, "--set", "opennebula.poll=3s")
	b, err := clean.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("clean: %v\n%s", err, b)
	}
	if len(one.Live()) != 0 {
		t.Fatalf("left %+v", one.Live())
	}
	if took > 9*time.Second {
		t.Fatalf("clean of 4 VMs took %s: sequential or paced by the poll interval", took)
	}
}
