package fleet

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// testHost returns a canned summary; it records the deadline its Cleanup got.
type testHost struct {
	name     string
	sum      *results.Summary
	gpus     int
	block    bool // Run waits for the run's cancel
	deadline time.Duration
}

func (h *testHost) Name() string                        { return h.name }
func (h *testHost) Provision(ctx context.Context) error { return nil }
func (h *testHost) ExpectGPUs() int                     { return h.gpus }
func (h *testHost) Run(ctx context.Context) (*results.Summary, error) {
	if h.block {
		<-ctx.Done()
		return h.sum, ctx.Err()
	}
	return h.sum, nil
}
func (h *testHost) Cleanup(ctx context.Context) error {
	if d, ok := ctx.Deadline(); ok {
		h.deadline = time.Until(d)
	}
	return nil
}

type testBackend struct {
	hosts   []Host
	cleanup time.Duration
}

func (b testBackend) Hosts(context.Context, RunInfo) ([]Host, []results.SkippedHost, error) {
	return b.hosts, nil, nil
}
func (b testBackend) Parallel() int                 { return 4 }
func (b testBackend) CleanupTimeout() time.Duration { return b.cleanup }
func (b testBackend) Finish(*results.Summary)       {}

func withGPUs(s *results.Summary, n int) *results.Summary {
	for i := range n {
		s.Hosts[0].Discovery.GPUs = append(s.Hosts[0].Discovery.GPUs, results.GPUInfo{Index: i, Name: "NVIDIA H200"})
	}
	s.Complete = true
	s.Caveats = []string{"a caveat of this host"}
	return s
}

func testPlan(t *testing.T) *config.Plan {
	t.Helper()
	t.Setenv("GPUVET_STATE_DIR", t.TempDir())
	p, err := config.Load(config.Options{Sets: []string{"backend=ssh", "ssh.hosts=[a]", "output.dir=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue 30: a host showing fewer GPUs than passed through fails; the backend's cleanup limit is
// the one each host gets; caveats name their host; node-to-node cells name a host, not a GPU.
func TestExecuteShortfallCleanupLimitCaveats(t *testing.T) {
	p := testPlan(t)
	a := &testHost{name: "a", sum: withGPUs(oneHost(healthy(), healthy()), 2), gpus: 2}
	b := &testHost{name: "b", sum: withGPUs(oneHost(healthy()), 1), gpus: 2}
	c := &testHost{name: "c", sum: withGPUs(oneHost(healthy(), healthy()), 2)}
	var out, errOut bytes.Buffer
	err := Execute(context.Background(), p, testBackend{hosts: []Host{a, b, c}, cleanup: 11 * time.Minute}, ExecOptions{Stdout: &out, Stderr: &errOut})
	if err == nil {
		t.Fatal("a host short of a GPU passed")
	}
	s, rerr := results.Read(filepath.Join(p.Config.Output.Dir, "summary.json"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	st := map[string]results.Host{}
	for _, h := range s.Hosts {
		st[h.Name] = h
	}
	if h := st["b"]; h.Status != results.StatusFailed || !strings.Contains(h.Error, "shows 1 GPU(s), 2 expected") {
		t.Fatalf("b: %s %q", h.Status, h.Error)
	}
	if st["a"].Status == results.StatusFailed || st["c"].Status == results.StatusFailed {
		t.Fatalf("a %s, c %s", st["a"].Status, st["c"].Status)
	}
	if a.deadline < 10*time.Minute {
		t.Fatalf("cleanup got %s, the backend asked for 11m", a.deadline)
	}
	for _, want := range []string{"a: a caveat of this host", "c: a caveat of this host"} {
		if !strings.Contains(strings.Join(s.Caveats, "\n"), want) {
			t.Fatalf("caveats %q lack %q", s.Caveats, want)
		}
	}
	for _, cmp := range s.Fleet.Comparisons {
		for _, v := range cmp.Values {
			if v.GPU != -1 || v.Host == "" {
				t.Fatalf("node-to-node cell %+v: want gpu -1 and the host", v)
			}
		}
	}
	if !strings.Contains(out.String(), "HOST") {
		t.Fatalf("no HOST column:\n%s", out.String())
	}
	if ids := strings.Count(s.RunID, "-"); ids != 1 || len(s.RunID) != len("20060102T150405Z-abcdef01") {
		t.Fatalf("run id %q", s.RunID)
	}
}

// Ctrl-C: the run and the hosts it cut short are interrupted (not failed) and the manifest stays.
func TestExecuteInterrupted(t *testing.T) {
	p := testPlan(t)
	ctx, cancel := context.WithCancel(context.Background())
	a := &testHost{name: "a", sum: withGPUs(oneHost(healthy()), 1), block: true}
	var startedErr string // the summary while the run goes: its advice for a killed run
	go func() {
		time.Sleep(200 * time.Millisecond)
		if s, err := results.Read(filepath.Join(p.Config.Output.Dir, "summary.json")); err == nil {
			startedErr = s.Error
		}
		cancel()
	}()
	var out, errOut bytes.Buffer
	err := Execute(ctx, p, testBackend{hosts: []Host{a}}, ExecOptions{Stdout: &out, Stderr: &errOut})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err %v", err)
	}
	s, _ := results.Read(filepath.Join(p.Config.Output.Dir, "summary.json"))
	if s == nil || s.Status != results.StatusInterrupted || s.Hosts[0].Status != results.StatusInterrupted || s.Complete {
		t.Fatalf("summary %+v", s)
	}
	dir, _ := StateDir()
	// The state directory holds the history database too: count the manifests.
	if ms, _ := Manifests(dir, "", ""); len(ms) != 1 {
		t.Fatalf("manifest not kept: %d manifests", len(ms))
	}
	if !strings.HasPrefix(startedErr, "the fleet run has not finished") || !strings.Contains(startedErr, "`gpuvet clean --run ") || strings.Contains(startedErr, "--manifest") {
		t.Errorf("a running fleet's summary advises: %q (the summary is no manifest: the advice names the run)", startedErr)
	}
}

func TestRunIDsUnique(t *testing.T) {
	now := time.Now()
	seen := map[string]bool{}
	for range 200 {
		id := results.NewRunID(now)
		if seen[id] {
			t.Fatalf("run id %s twice in one second", id)
		}
		seen[id] = true
	}
}

// planBackend records the plan Execute hands its hosts and the outcomes its Close got.
type planBackend struct {
	testBackend
	plan   []byte
	closed []Outcome
}

func (b *planBackend) Hosts(ctx context.Context, ri RunInfo) ([]Host, []results.SkippedHost, error) {
	b.plan = ri.Plan
	return b.hosts, nil, nil
}

func (b *planBackend) Close(_ context.Context, outs []Outcome) error {
	b.closed = outs
	return errors.New("namespace gpuvet-x still terminating")
}

// Issue 29: every fleet backend's hosts get Plan.RemoteYAML: a local baseline path and this
// machine's kubeconfig never travel (a pod's preflight would exit 2 on the path), while the
// baseline is applied on the merged summary here. A Closer's run-wide cleanup runs once, after
// every host, and what it leaves is a LEFTOVERS caveat; backend kubernetes' environment is k8s.
func TestExecuteRemotePlanBaselineCloser(t *testing.T) {
	t.Setenv("GPUVET_STATE_DIR", t.TempDir())
	out := t.TempDir()
	base := filepath.Join(t.TempDir(), "site-baseline.json")
	p, err := config.Load(config.Options{Sets: []string{"backend=kubernetes", "kubernetes.image=img", "kubernetes.kubeconfig=/home/me/.kube/prod",
		"output.dir=" + out, "run.save_baseline=true"}})
	if err != nil {
		t.Fatal(err)
	}
	a := &testHost{name: "a", sum: withGPUs(oneHost(healthy(), healthy()), 2)}
	b := &planBackend{testBackend: testBackend{hosts: []Host{a}}}
	var stdout, stderr bytes.Buffer
	if err := Execute(context.Background(), p, b, ExecOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if len(b.closed) != 1 || b.closed[0].Host != "a" {
		t.Errorf("Close got %+v, want the one host's outcome", b.closed)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Environment != "k8s" || !strings.Contains(strings.Join(s.Caveats, "\n"), "LEFTOVERS: namespace gpuvet-x still terminating") {
		t.Errorf("environment %q, caveats %q", s.Environment, s.Caveats)
	}
	saved, err := os.ReadFile(filepath.Join(out, "baseline.json"))
	if err != nil {
		t.Fatalf("--save-baseline on a fleet run: %v", err)
	}
	if err := os.WriteFile(base, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	// The second run compares against it: the overhead table, from a path only this machine has.
	out2 := t.TempDir()
	p2, err := config.Load(config.Options{Sets: []string{"backend=kubernetes", "kubernetes.image=img", "output.dir=" + out2, "run.baseline=" + base}})
	if err != nil {
		t.Fatal(err)
	}
	b2 := &planBackend{testBackend: testBackend{hosts: []Host{&testHost{name: "a", sum: withGPUs(oneHost(healthy(), healthy()), 2)}}}}
	stdout.Reset()
	if err := Execute(context.Background(), p2, b2, ExecOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, plan := range [][]byte{b.plan, b2.plan} {
		for _, local := range []string{base, "/home/me/.kube/prod", "save_baseline: true"} {
			if strings.Contains(string(plan), local) {
				t.Errorf("the hosts' plan carries %q:\n%s", local, plan)
			}
		}
	}
	s2, err := results.Read(filepath.Join(out2, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s2.Baseline == nil || s2.Baseline.BaselineFile != base || len(s2.Baseline.Rows) == 0 {
		t.Fatalf("no baseline comparison on the merged summary: %+v", s2.Baseline)
	}
}
