package main

import (
	"bytes"
	"encoding/json"
	"fmt"
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

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/opennebula/onetest"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/ssh/sshdtest"
	"github.com/gpuvet/gpuvet/internal/ssh/sshtest"
)

// realLab is a fleet of real OpenSSH hosts: one Debian sshd per loopback address (127.0.0.x), each
// with host keys of all three types, logging in the test key as root; this test binary plays the
// gpuvet binary copied there (sshd's SetEnv makes it act as gpuvet).
type realLab struct {
	dir, key, knownHosts, state, remote string
	authorized                          string
	env                                 []string // what its gpuvet processes get in their environment (parallel tests each their own)
}

func newRealLab(t *testing.T) *realLab {
	t.Helper()
	if _, err := sshdtest.Binary(); err != nil {
		t.Skipf("real sshd tests skipped: %v", err)
	}
	dir := t.TempDir()
	l := &realLab{dir: dir, key: filepath.Join(dir, "id_ed25519"), knownHosts: filepath.Join(dir, "known_hosts"),
		state: filepath.Join(dir, "state"), remote: filepath.Join(dir, "remote")}
	pub, err := sshtest.NewKey(l.key)
	if err != nil {
		t.Fatal(err)
	}
	l.authorized = strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pub)))
	if err := os.MkdirAll(l.remote, 0o755); err != nil {
		t.Fatal(err)
	}
	l.env = []string{"GPUVET_STATE_DIR=" + l.state, "SSH_AUTH_SOCK="}
	return l
}

// cmd is gpuvet as its own process with the lab's environment.
func (l *realLab) cmd(args ...string) *exec.Cmd {
	cmd := gpuvet(args...)
	cmd.Env = append(cmd.Env, l.env...)
	return cmd
}

// run runs gpuvet with the lab's environment and extra variables; its exit code, stdout, stderr.
func (l *realLab) run(args []string, env ...string) (int, string, string) {
	return runProcess(append(slices.Clone(l.env), env...), args)
}

// sshd starts a real sshd on host and trusts it in known_hosts by the key types given (none: all).
func (l *realLab) sshd(t *testing.T, host string, known ...string) *sshdtest.SSHD {
	t.Helper()
	s := l.start(t, host)
	l.trust(t, s.KnownHostsLines(known...))
	return s
}

// start starts a real sshd on host, not yet in known_hosts.
func (l *realLab) start(t *testing.T, host string) *sshdtest.SSHD {
	t.Helper()
	return sshdtest.Start(t, host, sshdtest.Options{Authorized: l.authorized,
		SetEnv: []string{"GPUVET_TEST_AS_GPUVET=1", "GPUVET_TEST_ENV_REPORT=" + l.envReport(host)}})
}

func (l *realLab) envReport(host string) string { return filepath.Join(l.dir, "env-"+host) }

func (l *realLab) trust(t *testing.T, lines string) {
	f, err := os.OpenFile(l.knownHosts, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprint(f, lines)
}

func (l *realLab) args(out string) []string {
	return append([]string{"run", "--out", out, "--set", "ssh.identity_file=" + l.key, "--set", "ssh.known_hosts=" + l.knownHosts,
		"--set", "ssh.config_file=/dev/null", "--set", "ssh.remote_dir=" + l.remote, "--set", "sim.gpus=2"}, quickSim...)
}

// waitRemoteSummary waits until a host's run has written its first summary (it is measuring) and
// returns its run folder.
func (l *realLab) waitRemoteSummary(t *testing.T, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(l.remote, "gpuvet-*", "out", "summary.json")); len(m) > 0 {
			return filepath.Dir(filepath.Dir(m[0]))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no remote run wrote a summary within %s", limit)
	return ""
}

// Items 3, 5, 7, 10, 11 of issue 30: default OpenSSH hosts known by one key type each, no $USER,
// HF_TOKEN reaching the hosts without argv or files, --force clearing an earlier fleet run's
// host folders, and a HOST column.
func TestRealSSHDStandardHostsSecretsAndTable(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	l := newRealLab(t)
	hosts := map[string]*sshdtest.SSHD{
		"ed": l.sshd(t, "127.0.0.2", "ed25519"), // known_hosts holds only the ed25519 key; the host offers all three
		"rs": l.sshd(t, "127.0.0.3", "rsa"),
		"ec": l.sshd(t, "127.0.0.4", "ecdsa"),
	}
	var inv strings.Builder
	inv.WriteString("hosts:\n")
	for _, n := range []string{"ed", "rs", "ec"} {
		fmt.Fprintf(&inv, "  - {name: %s, host: %s, port: %d}\n", n, hosts[n].Host, hosts[n].Port)
	}
	invFile := filepath.Join(l.dir, "inventory.yaml")
	os.WriteFile(invFile, []byte(inv.String()), 0o644)
	out := filepath.Join(l.dir, "out")
	// An earlier fleet run's leftovers in --out: --force must clear them, and only them.
	os.MkdirAll(filepath.Join(out, "hosts", "ghost"), 0o755)
	os.WriteFile(filepath.Join(out, "hosts", "ghost", "summary.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(out, "vm_known_hosts"), []byte("[10.0.0.5]:22 ssh-ed25519 AAAA\n"), 0o600)
	os.WriteFile(filepath.Join(out, "summary.json"), []byte(`{"schema_version":"`+results.SchemaVersion+`","run_id":"old","status":"ok","outputs":["hosts/ghost/summary.json"]}`), 0o644)
	os.WriteFile(filepath.Join(out, "hosts", "notes.txt"), []byte("mine"), 0o644) // the user's: --force keeps it
	token := "hf_TEST" + strconv.FormatInt(time.Now().UnixNano(), 36)
	code, stdout, stderr := l.run(append(l.args(out), "--backend", "ssh", "--inventory", invFile, "--force"),
		"HF_TOKEN="+token, "USER=") // no $USER: cron, systemd, containers
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Hosts) != 3 {
		t.Fatalf("%d hosts", len(s.Hosts))
	}
	for _, h := range s.Hosts {
		if h.Status == results.StatusFailed {
			t.Fatalf("host %s failed: %s\n%s", h.Name, h.Error, stderr)
		}
		b, err := os.ReadFile(l.envReport(hosts[h.Name].Host))
		if err != nil || !strings.Contains(string(b), "HF_TOKEN="+token+" argv=false") {
			t.Fatalf("host %s: HF_TOKEN did not arrive, or came in argv: %q (%v)", h.Name, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "hosts", "ghost")); err == nil {
		t.Fatal("--force kept an earlier run's hosts/ghost")
	}
	if _, err := os.Stat(filepath.Join(out, "vm_known_hosts")); err == nil {
		t.Fatal("--force kept an earlier run's vm_known_hosts")
	}
	if _, err := os.Stat(filepath.Join(out, "hosts", "notes.txt")); err != nil || !strings.Contains(stderr, "hosts/notes.txt") {
		t.Fatalf("--force removed a file the earlier run did not write, or did not say it kept it: %v\n%s", err, stderr)
	}
	// The table: one row per host and GPU, named by host.
	if !strings.Contains(stdout, "HOST") {
		t.Fatalf("no HOST column:\n%s", stdout)
	}
	for _, n := range []string{"ed", "rs", "ec"} {
		found := false
		for _, line := range strings.Split(stdout, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == n && f[1] == "Qwen/Qwen3-8B" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no table row for host %s:\n%s", n, stdout)
		}
	}
	// The token is nowhere: not in the output, nor in any file of --out.
	if strings.Contains(stdout+stderr, token) {
		t.Fatal("HF_TOKEN reached the output")
	}
	_ = filepath.Walk(out, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(token)) {
				t.Errorf("HF_TOKEN in %s", p)
			}
		}
		return nil
	})
	if left, _ := os.ReadDir(l.remote); len(left) != 0 {
		t.Fatalf("left on the hosts: %v", left)
	}
}

// Item 1: a host whose gpuvet is killed (kill -9, as the OOM killer does) mid-run fails.
func TestRealSSHDRemoteKilledFailsHost(t *testing.T) {
	t.Parallel()
	l := newRealLab(t)
	h := l.sshd(t, "127.0.0.5")
	out := filepath.Join(l.dir, "out")
	done := make(chan struct{})
	var code int
	var stdout, stderr string
	go func() {
		defer close(done)
		code, stdout, stderr = l.run(append(l.args(out), "--backend", "ssh", "--hosts", h.Host, "--set", "ssh.port="+strconv.Itoa(h.Port),
			"--set", "load.max_duration=30s"))
	}()
	dir := l.waitRemoteSummary(t, 120*time.Second)
	pid, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the remote gpuvet %d: %v", p, err)
	}
	<-done
	if code != exitFailed {
		t.Fatalf("a host whose gpuvet died: exit %d\n%s\n%s", code, stdout, stderr)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Hosts) != 1 || s.Hosts[0].Status != results.StatusFailed || !strings.Contains(s.Hosts[0].Error, "died (exit 137") {
		t.Fatalf("host: %+v", s.Hosts)
	}
	if _, err := os.Stat(filepath.Join(out, "hosts", h.Host, "summary.json")); err != nil {
		t.Fatalf("the dead run's partial results were not kept: %v", err)
	}
}

// Items 4 and 9, and `clean` trusting nothing: the controller is killed (kill -9) mid-run on a host
// named only by its ssh_config alias; `clean --manifest` logs in through the alias, collects the
// host's partial results into --out, removes the run folder, and refuses the folders planted in
// the manifest (one without the run's marker, one outside gpuvet's naming).
func TestRealSSHDKilledControllerCleanViaAlias(t *testing.T) {
	t.Parallel()
	l := newRealLab(t)
	h := l.sshd(t, "127.0.0.6")
	cfg := filepath.Join(l.dir, "ssh_config")
	os.WriteFile(cfg, []byte(fmt.Sprintf("Host gpu-a\n  HostName %s\n  Port %d\n  User root\n  IdentityFile %s\n", h.Host, h.Port, l.key)), 0o600)
	out := filepath.Join(l.dir, "out")
	cmd := l.cmd(append([]string{"run", "--out", out, "--backend", "ssh", "--hosts", "gpu-a", "--set", "ssh.config_file=" + cfg,
		"--set", "ssh.known_hosts=" + l.knownHosts, "--set", "ssh.remote_dir=" + l.remote, "--set", "sim.gpus=2"},
		append(quickSim, "--set", "load.max_duration=30s")...)...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dir := l.waitRemoteSummary(t, 120*time.Second)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	ms, _ := filepath.Glob(filepath.Join(l.state, "ssh-*.json"))
	if len(ms) != 1 {
		t.Fatalf("manifests %v\n%s", ms, output.String())
	}
	m, err := fleet.ReadManifest(ms[0])
	if err != nil {
		t.Fatal(err)
	}
	// Plant two folders in the manifest: gpuvet must leave both alone.
	planted := filepath.Join(l.remote, "gpuvet-"+m.RunID+"-planted") // the run's name, no marker
	victim := filepath.Join(l.dir, "victim")                         // not a gpuvet name at all
	for _, d := range []string{planted, victim} {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "precious"), []byte("x"), 0o644)
	}
	obj := m.Objects[0]
	for _, d := range []string{planted, victim} {
		o := obj
		o.Name = d
		m.Objects = append(m.Objects, o)
	}
	b, _ := json.Marshal(m)
	os.WriteFile(ms[0], b, 0o600)
	clean := l.cmd("clean", "--manifest", ms[0], "--set", "ssh.config_file="+cfg, "--set", "ssh.known_hosts="+l.knownHosts)
	got, err := clean.CombinedOutput()
	if err == nil {
		t.Fatalf("clean did not report the planted folders it refused:\n%s", got)
	}
	if !strings.Contains(string(got), "removed ssh-dir "+dir) {
		t.Fatalf("clean did not remove the run folder through the alias:\n%s", got)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("run folder %s left", dir)
	}
	for _, d := range []string{planted, victim} {
		if _, err := os.Stat(filepath.Join(d, "precious")); err != nil {
			t.Fatalf("clean deleted %s, which is not gpuvet's:\n%s", d, got)
		}
	}
	if !strings.Contains(string(got), "not gpuvet's") || !strings.Contains(string(got), "not a gpuvet run folder") {
		t.Fatalf("no refusal named:\n%s", got)
	}
	s, err := results.Read(filepath.Join(out, "hosts", "gpu-a", "summary.json"))
	if err != nil || len(s.Hosts) == 0 {
		t.Fatalf("the host's partial results were not collected before deleting: %v", err)
	}
	if s, err := results.Read(filepath.Join(out, "summary.json")); err != nil || s.Status != results.StatusIncomplete || s.Complete {
		t.Fatalf("the killed fleet run's summary.json: %v %+v", err, s)
	}
}

// Item 8: a connection that drops mid-run (the host stays up) still ends with the run folder
// removed: cleanup reconnects.
func TestRealSSHDDroppedConnectionStillCleansUp(t *testing.T) {
	t.Parallel()
	l := newRealLab(t)
	h := l.start(t, "127.0.0.7")
	p := sshdtest.StartProxy(t, h.Host, h.Addr())
	for _, kt := range sshdtest.KeyTypes { // the proxy's address is how gpuvet knows the host
		l.trust(t, fmt.Sprintf("[%s]:%d %s\n", h.Host, p.Port(), h.HostKeys[kt]))
	}
	out := filepath.Join(l.dir, "out")
	done := make(chan struct{})
	var code int
	var stdout, stderr string
	go func() {
		defer close(done)
		code, stdout, stderr = l.run(append(l.args(out), "--backend", "ssh", "--hosts", h.Host, "--set", "ssh.port="+strconv.Itoa(p.Port()),
			"--set", "load.max_duration=30s"))
	}()
	l.waitRemoteSummary(t, 120*time.Second)
	p.Drop()
	<-done
	if code != exitFailed {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if left, _ := os.ReadDir(l.remote); len(left) != 0 {
		t.Fatalf("the run folder was left after a dropped connection: %v\n%s", left, stderr)
	}
	if m, _ := os.ReadDir(l.state); len(m) != 0 {
		t.Fatalf("manifest left: %v", m)
	}
}

// Item 9: Ctrl-C makes the run and its host interrupted (not failed) and keeps the manifest whose
// path was printed; `clean --manifest` on it confirms nothing is left.
func TestRealSSHDInterruptKeepsManifest(t *testing.T) {
	t.Parallel()
	l := newRealLab(t)
	h := l.sshd(t, "127.0.0.8")
	out := filepath.Join(l.dir, "out")
	cmd := l.cmd(append(l.args(out), "--backend", "ssh", "--hosts", h.Host, "--set", "ssh.port="+strconv.Itoa(h.Port), "--set", "load.max_duration=30s")...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l.waitRemoteSummary(t, 120*time.Second)
	_ = cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if cmd.ProcessState.ExitCode() != exitFailed {
		t.Fatalf("exit %v\n%s", err, output.String())
	}
	s, rerr := results.Read(filepath.Join(out, "summary.json"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if s.Status != results.StatusInterrupted || len(s.Hosts) != 1 || s.Hosts[0].Status != results.StatusInterrupted {
		t.Fatalf("run %s, hosts %+v", s.Status, s.Hosts)
	}
	ms, _ := filepath.Glob(filepath.Join(l.state, "ssh-*.json"))
	if len(ms) != 1 || !strings.Contains(output.String(), ms[0]) {
		t.Fatalf("manifest %v not kept, or not the one printed\n%s", ms, output.String())
	}
	if left, _ := os.ReadDir(l.remote); len(left) != 0 {
		t.Fatalf("left on the host: %v", left)
	}
	clean := l.cmd("clean", "--manifest", ms[0])
	if b, err := clean.CombinedOutput(); err != nil || !strings.Contains(string(b), "nothing left") {
		t.Fatalf("clean --manifest of an interrupted run: %v\n%s", err, b)
	}
	if _, err := os.Stat(ms[0]); err == nil {
		t.Fatal("the manifest is still there after clean")
	}
}

// The opennebula backend with real OpenSSH servers as its VMs (one sshd per VM address, all on
// one port, as sshd on 22): each VM's fresh host key is trusted on first use, whatever its type,
// the run's folders are gone, every VM terminated, and HF_TOKEN reached each VM on stdin.
func TestRealSSHDOpenNebulaVMs(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	l := newRealLab(t)
	port := l.start(t, "127.0.0.10").Port
	sshdtest.Start(t, "127.0.0.11", sshdtest.Options{Authorized: l.authorized, Port: port,
		SetEnv: []string{"GPUVET_TEST_AS_GPUVET=1", "GPUVET_TEST_ENV_REPORT=" + l.envReport("127.0.0.11")}})
	var mu sync.Mutex
	next := 10
	one := &onetest.Server{Auth: "oneadmin:pw", Hosts: []onetest.Host{
		{ID: 0, Name: "node1", Cluster: "gpu", State: 2, PCI: []onetest.PCI{onetest.GPU("41:00.0", 0), onetest.GPU("c1:00.0", 1)}},
		{ID: 1, Name: "node2", Cluster: "gpu", State: 2, PCI: []onetest.PCI{onetest.GPU("41:00.0", 0), onetest.GPU("c1:00.0", 1)}},
	}, IPFor: func(string, int) string {
		mu.Lock()
		defer mu.Unlock()
		next++
		return fmt.Sprintf("127.0.0.%d", next-1)
	}, TerminateSteps: 2}
	onetest.Start(one)
	t.Cleanup(one.Close)
	token := "hf_VM" + strconv.FormatInt(time.Now().UnixNano(), 36)
	out := filepath.Join(l.dir, "out")
	code, stdout, stderr := l.run(append(l.args(out), "--backend", "opennebula", "--endpoint", one.URL, "--set", "opennebula.template_id=5",
		"--set", "opennebula.ssh_port="+strconv.Itoa(port), "--set", "opennebula.poll=20ms"), "ONE_AUTH="+one.Auth, "HF_TOKEN="+token)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Hosts {
		if h.Status == results.StatusFailed || len(h.VMs) != 1 || !h.VMs[0].Terminated {
			t.Fatalf("%s: %s %q %+v", h.Name, h.Status, h.Error, h.VMs)
		}
	}
	for _, ip := range []string{"127.0.0.10", "127.0.0.11"} {
		if b, err := os.ReadFile(l.envReport(ip)); err != nil || !strings.Contains(string(b), "HF_TOKEN="+token+" argv=false") {
			t.Fatalf("VM %s: HF_TOKEN %q (%v)", ip, b, err)
		}
	}
	if len(one.Live()) != 0 {
		t.Fatalf("VMs left %+v", one.Live())
	}
	if left, _ := os.ReadDir(l.remote); len(left) != 0 {
		t.Fatalf("left in the VMs: %v", left)
	}
}
