package ssh

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuvet/gpuvet/internal/ssh/sshtest"
)

type fixture struct {
	srv    *sshtest.Server
	opts   Options
	target Target
	bin    string
	local  string
}

func newFixture(t *testing.T, env ...string) *fixture {
	t.Helper()
	tmp := t.TempDir()
	key := filepath.Join(tmp, "id_ed25519")
	pub, err := sshtest.NewKey(key)
	if err != nil {
		t.Fatal(err)
	}
	hostDir := filepath.Join(tmp, "host")
	if err := os.Mkdir(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := sshtest.Start(hostDir, pub)
	if err != nil {
		t.Fatal(err)
	}
	srv.Env = env
	t.Cleanup(srv.Close)
	kh := filepath.Join(tmp, "known_hosts")
	if err := os.WriteFile(kh, []byte(srv.KnownHostsLine(nil)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "gpuvet")
	if err := os.WriteFile(bin, []byte(sshtest.FakeGpuvet), 0o755); err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, bin: bin, local: filepath.Join(tmp, "collected"),
		opts:   Options{ConfigFile: filepath.Join(tmp, "no-config"), KnownHosts: []string{kh}, AgentSocket: "/nonexistent", ConnectTimeout: 5 * time.Second},
		target: Target{Name: "h1", Host: "127.0.0.1", Port: srv.Port(), User: "gpuvet", IdentityFiles: []string{key}}}
}

// dial connects to the fixture's host; the connection closes with the test.
func (f *fixture) dial(t *testing.T) *gossh.Client {
	t.Helper()
	c, err := Dial(context.Background(), f.target, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (f *fixture) job(progress func(string)) Job {
	return Job{Binary: f.bin, BinaryArch: runtime.GOARCH, Plan: []byte("models: [m]\n"), Args: []string{"--backend", "local"},
		RunID: "run1", RemoteDir: filepath.Join(f.srv.Dir, "gpuvet-run1"), LocalOut: f.local, Progress: progress, StopGrace: 5 * time.Second}
}

// runJob is a host's job in one call, as Host does it in its phases: Prepare, Execute and Remove
// whatever happens (success, failure, ctx cancelled). left is what Remove could not remove ("":
// nothing); Remove runs on a fresh context, so an interrupted run still cleans up.
func runJob(ctx context.Context, c *gossh.Client, j Job) (out *Outcome, left string, err error) {
	remove := func() string {
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := Remove(rctx, c, j.RemoteDir, j.RunID); err != nil {
			return err.Error()
		}
		return ""
	}
	if err := Prepare(ctx, c, j); err != nil {
		if !errors.Is(err, errNotCreated) {
			left = remove()
		}
		return &Outcome{ExitCode: -1}, left, err
	}
	defer func() { left = remove() }()
	out, err = Execute(ctx, c, j)
	return out, left, err
}

func TestRunCopiesRunsCollectsAndCleansUp(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	var mu sync.Mutex
	var lines []string
	out, notRemoved, err := runJob(context.Background(), c, f.job(func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if out.Summary == nil || out.Summary.Status != "ok" || out.ExitCode != 0 || notRemoved != "" {
		t.Fatalf("outcome %+v, not removed: %s", out, notRemoved)
	}
	if !slices.Contains(lines, "done: status ok") || !slices.Contains(lines, "run r1: backend local, out out") {
		t.Fatalf("progress lines %q", lines)
	}
	if b, err := os.ReadFile(filepath.Join(f.local, "logs", "engine-0.log")); err != nil || string(b) != "engine log\n" {
		t.Fatalf("log not collected: %q %v", b, err)
	}
	if left := f.srv.Files(); len(left) != 0 {
		t.Fatalf("left on the host: %v", left)
	}
}

func TestRunRecordsARunWithoutSummary(t *testing.T) {
	f := newFixture(t, "FAKE_MODE=fail")
	c := f.dial(t)
	out, _, err := runJob(context.Background(), c, f.job(nil))
	if err == nil || !strings.Contains(err.Error(), "no NVIDIA driver") || out.ExitCode != 2 {
		t.Fatalf("want the remote's reason in the error, got %v (exit %d)", err, out.ExitCode)
	}
	if left := f.srv.Files(); len(left) != 0 {
		t.Fatalf("left on the host: %v", left)
	}
}

func TestRunInterruptedStopsRemoteAndCleansUp(t *testing.T) {
	f := newFixture(t, "FAKE_MODE=sleep")
	c := f.dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	j := f.job(nil)
	go func() {
		for {
			if _, err := os.Stat(filepath.Join(j.RemoteDir, "started")); err == nil {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	out, _, err := runJob(ctx, c, j)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("want interrupted, got %v", err)
	}
	if out.Summary == nil || out.Summary.Complete {
		t.Fatalf("the partial summary was not collected: %+v", out.Summary)
	}
	if left := f.srv.Files(); len(left) != 0 {
		t.Fatalf("left on the host: %v", left)
	}
}

func TestRunHostDiesMidRun(t *testing.T) {
	f := newFixture(t, "FAKE_MODE=sleep")
	c := f.dial(t)
	j := f.job(nil)
	go func() {
		for {
			if _, err := os.Stat(filepath.Join(j.RemoteDir, "started")); err == nil {
				f.srv.DropConnections()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	_, _, err := runJob(context.Background(), c, j)
	if err == nil || !strings.Contains(err.Error(), "died mid-run") {
		t.Fatalf("want died mid-run, got %v", err)
	}
}

func TestRunRefusesAnotherArchitecture(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	j := f.job(nil)
	j.BinaryArch = "riscv64"
	if _, _, err := runJob(context.Background(), c, j); err == nil || !strings.Contains(err.Error(), "GOARCH=") {
		t.Fatalf("want an architecture error, got %v", err)
	}
	if left := f.srv.Files(); len(left) != 0 {
		t.Fatalf("left on the host: %v", left)
	}
}

func TestDialFailures(t *testing.T) {
	f := newFixture(t)
	other := filepath.Join(t.TempDir(), "other")
	otherPub, err := sshtest.NewKey(other)
	if err != nil {
		t.Fatal(err)
	}
	wrongKH := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(wrongKH, []byte(f.srv.KnownHostsLine(otherPub)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyKH := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyKH, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mod    func(*Target, *Options)
		want   error
		reason string
	}{
		{"wrong host key", func(_ *Target, o *Options) { o.KnownHosts = []string{wrongKH} }, ErrHostKey, "does not match known_hosts"},
		{"unknown host", func(_ *Target, o *Options) { o.KnownHosts = []string{emptyKH} }, ErrHostKey, "ssh-keyscan"},
		{"refused key", func(t *Target, _ *Options) { t.IdentityFiles = []string{other} }, ErrAuth, "refused every key"},
		{"no key", func(t *Target, _ *Options) { t.IdentityFiles = []string{"/nonexistent"} }, ErrAuth, "no SSH key"},
		{"unreachable", func(t *Target, _ *Options) { t.Port = closedPort }, ErrUnreachable, "127.0.0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg, o := f.target, f.opts
			o.KnownHosts = slices.Clone(o.KnownHosts)
			tc.mod(&tg, &o)
			c, err := Dial(context.Background(), tg, o)
			if c != nil {
				c.Close()
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("want %v with %q, got %v", tc.want, tc.reason, err)
			}
		})
	}
}

// closedPort is a loopback port nothing listens on (the tests' listeners take ephemeral ports).
const closedPort = 1

func TestResolveReadsSSHConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	if err := os.WriteFile(cfg, []byte("Host gpu1\n  HostName 10.0.0.5\n  User ops\n  Port 2222\n  IdentityFile /keys/gpu\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(Target{Name: "gpu1"}, Options{ConfigFile: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != "10.0.0.5" || got.User != "ops" || got.Port != 2222 || !slices.Equal(got.IdentityFiles, []string{"/keys/gpu"}) {
		t.Fatalf("resolved %+v", got)
	}
	// The inventory wins over ssh_config; an unknown host keeps its name and the defaults.
	got, _ = Resolve(Target{Name: "gpu1", Port: 22, User: "root"}, Options{ConfigFile: cfg})
	if got.Port != 22 || got.User != "root" || got.Host != "10.0.0.5" {
		t.Fatalf("inventory should win: %+v", got)
	}
	got, _ = Resolve(Target{Name: "other"}, Options{ConfigFile: cfg, User: "u", Port: 2200})
	if got.Host != "other" || got.User != "u" || got.Port != 2200 || len(got.IdentityFiles) != 0 {
		t.Fatalf("defaults: %+v", got)
	}
	if err := os.WriteFile(cfg, []byte("Host gpu1\n  Port banana\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(Target{Name: "gpu1"}, Options{ConfigFile: cfg}); err == nil || !strings.Contains(err.Error(), "banana") {
		t.Fatalf("want a Port error, got %v", err)
	}
}

func TestRemoveStopsARunLeftBehind(t *testing.T) {
	f := newFixture(t, "FAKE_MODE=sleep")
	c := f.dial(t)
	j := f.job(nil)
	if err := Prepare(context.Background(), c, j); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = Execute(context.Background(), c, j) }()
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(filepath.Join(j.RemoteDir, "started")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	pid, _ := os.ReadFile(filepath.Join(j.RemoteDir, "pid"))
	// A second connection (gpuvet clean) removes the folder of a run still going.
	if err := Remove(context.Background(), f.dial(t), j.RemoteDir, j.RunID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("/proc", strings.TrimSpace(string(pid)))); err == nil {
		if b, _ := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "stat")); !strings.Contains(string(b), ") Z") {
			t.Fatalf("the remote run %s still runs", pid)
		}
	}
	if left := f.srv.Files(); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
}

func TestParseInventory(t *testing.T) {
	hs, err := ParseInventory("inv.yaml", []byte("hosts:\n  - {name: a}\n  - {name: b, host: 10.0.0.2, user: ops, port: 2222, identity_file: ~/.ssh/k, gpus: 2, set: [\"sim.straggler=0\"]}\n"))
	if err != nil || len(hs) != 2 || hs[1].Port != 2222 || hs[1].GPUs != 2 || hs[1].Set[0] != "sim.straggler=0" {
		t.Fatalf("%+v %v", hs, err)
	}
	for _, bad := range []struct{ doc, want string }{
		{"hosts:\n  - {name: a, colour: red}\n", "colour"},
		{"hosts:\n  - {host: x}\n", "name is required"},
		{"hosts:\n  - {name: a}\n  - {name: a}\n", "listed twice"},
		{"hosts:\n  - {name: a, port: 70000}\n", "not a port"},
		{"hosts:\n  - {name: a, set: [oops]}\n", "key=value"},
		{"hosts: []\n", "no hosts"},
	} {
		if _, err := ParseInventory("inv.yaml", []byte(bad.doc)); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "inv.yaml") {
			t.Errorf("%q: want an error with %q, got %v", bad.doc, bad.want, err)
		}
	}
}

func FuzzParseInventory(f *testing.F) {
	f.Add([]byte("hosts:\n  - {name: a, port: 22, set: [\"a=b\"]}\n"))
	f.Add([]byte("hosts: [{name: x}, {name: y, gpus: -1}]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hs, err := ParseInventory("fuzz", b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, h := range hs {
			if strings.TrimSpace(h.Name) == "" || seen[h.Name] || h.Port < 0 || h.Port > 65535 || h.GPUs < 0 {
				t.Fatalf("accepted a bad host %+v", h)
			}
			seen[h.Name] = true
		}
	})
}
