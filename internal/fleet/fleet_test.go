package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// fakeHost is a host whose phases do what the test says.
type fakeHost struct {
	name        string
	provErr     error
	runErr      error
	panicRun    bool
	block       bool // Run waits for ctx
	sum         *results.Summary
	cleaned     atomic.Bool
	cleanCtxErr error
	madeNothing bool // Cleanup says ErrNothingMade
	active      *atomic.Int32
	peak        *atomic.Int32
}

func (h *fakeHost) Name() string { return h.name }
func (h *fakeHost) Provision(context.Context) error {
	return h.provErr
}
func (h *fakeHost) Run(ctx context.Context) (*results.Summary, error) {
	if h.active != nil {
		n := h.active.Add(1)
		defer h.active.Add(-1)
		for {
			p := h.peak.Load()
			if n <= p || h.peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h.panicRun {
		panic("boom")
	}
	if h.block {
		<-ctx.Done()
		return h.sum, ctx.Err()
	}
	return h.sum, h.runErr
}
func (h *fakeHost) Cleanup(ctx context.Context) error {
	h.cleaned.Store(true)
	h.cleanCtxErr = ctx.Err()
	if h.madeNothing {
		return ErrNothingMade
	}
	return nil
}

func TestRunBoundsParallelism(t *testing.T) {
	var active, peak atomic.Int32
	var hosts []Host
	for i := range 7 {
		hosts = append(hosts, &fakeHost{name: string(rune('a' + i)), sum: oneHost(healthy()), active: &active, peak: &peak})
	}
	out := Run(context.Background(), hosts, Options{Parallel: 3})
	if p := peak.Load(); p > 3 || p < 2 {
		t.Errorf("peak concurrency %d, want ≤ 3 (and > 1: they do overlap)", p)
	}
	for i, o := range out {
		if o.Host != hosts[i].Name() || o.Err != nil || o.Summary == nil {
			t.Errorf("outcome %d: %+v", i, o)
		}
	}
}

func TestRunFailedHostIsRecordedNotFatal(t *testing.T) {
	bad := &fakeHost{name: "bad", provErr: errors.New("image pull failed")}
	pan := &fakeHost{name: "panics", panicRun: true}
	good := &fakeHost{name: "good", sum: oneHost(healthy())}
	var lines []string
	var mu sync.Mutex
	out := Run(context.Background(), []Host{bad, pan, good}, Options{Parallel: 2, Progress: func(f string, a ...any) {
		mu.Lock()
		lines = append(lines, f)
		mu.Unlock()
	}})
	if out[0].Phase != PhaseProvision || !strings.Contains(out[0].Err.Error(), "image pull") {
		t.Errorf("bad host: %+v", out[0])
	}
	if out[1].Phase != PhaseRun || !strings.Contains(out[1].Err.Error(), "panic: boom") {
		t.Errorf("panicking host: %+v", out[1])
	}
	if out[2].Err != nil || out[2].Summary == nil {
		t.Errorf("good host: %+v", out[2])
	}
	for _, h := range []*fakeHost{bad, pan, good} {
		if !h.cleaned.Load() {
			t.Errorf("%s not cleaned up", h.name)
		}
	}
	s := Merge(&results.Summary{RunID: "r1", Backend: "kubernetes"}, out, []results.SkippedHost{{Name: "n9", Reason: "no free nvidia.com/gpu"}}, 2)
	if len(s.Hosts) != 3 || s.Hosts[0].Status != results.StatusFailed || !strings.Contains(s.Hosts[0].Error, "provision failed: image pull failed") {
		t.Fatalf("merged hosts %+v", s.Hosts)
	}
	if s.Hosts[2].Name != "good" || s.Hosts[2].Error != "" || len(s.Hosts[2].Models) != 1 {
		t.Errorf("good host merged as %+v", s.Hosts[2])
	}
	if s.Fleet.ParallelHosts != 2 || len(s.Fleet.Skipped) != 1 {
		t.Errorf("fleet %+v", s.Fleet)
	}
}

func TestRunCleanupSurvivesCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := &fakeHost{name: "a", block: true, sum: oneHost(healthy())}
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	out := Run(ctx, []Host{h}, Options{})
	if !h.cleaned.Load() || h.cleanCtxErr != nil {
		t.Errorf("cleanup ran %v with ctx err %v, want a live context", h.cleaned.Load(), h.cleanCtxErr)
	}
	if out[0].Summary == nil || out[0].Phase != PhaseRun {
		t.Errorf("cancelled host keeps its partial summary: %+v", out[0])
	}
}

func TestCompareNodesFlagsStraggler(t *testing.T) {
	outs := []Outcome{
		{Host: "node-a", Summary: oneHost(healthy(), healthy())},
		{Host: "node-b", Summary: oneHost(healthy().scaled(0.3), healthy().scaled(0.3))},
		{Host: "node-c", Summary: oneHost(healthy(), healthy().scaled(0.02))},
		{Host: "node-d", Err: errors.New("gone"), Phase: PhaseRun},
	}
	s := Merge(&results.Summary{RunID: "r"}, outs, nil, 1)
	judge.CompareNodes(s, compare.LLMGuards(), judge.DefaultConfig().GEMMGuardsFrom())
	judge.CompareNodes(s, compare.LLMGuards(), judge.DefaultConfig().GEMMGuardsFrom()) // idempotent
	if len(s.Fleet.Comparisons) == 0 {
		t.Fatal("no node comparisons")
	}
	var flaggedB int
	for i, h := range s.Hosts {
		for _, f := range h.Flags {
			if f.Check != judge.CheckNodeToNode {
				continue
			}
			if i != 1 {
				t.Errorf("%s flagged: %s", h.Name, f.Reason)
			}
			flaggedB++
			if f.Subject != "node node-b" || strings.Contains(f.Reason, "node-b") || strings.Contains(f.Reason, "gpu 1") {
				t.Errorf("subject %q, reason %q: want the node named by the subject, once", f.Subject, f.Reason)
			}
		}
	}
	if flaggedB == 0 {
		t.Errorf("straggler node-b not flagged; comparisons %+v", s.Fleet.Comparisons)
	}
	for _, c := range s.Fleet.Comparisons {
		if len(c.Values) != 3 {
			t.Errorf("%s: %d values, want 3 (failed node-d left out)", c.Metric, len(c.Values))
		}
		for _, v := range c.Values {
			if v.Host == "" || v.Host == "node-d" {
				t.Errorf("%s: cell host %q", c.Metric, v.Host)
			}
		}
	}
	judge.Apply(s, judge.Config{})
	if s.Hosts[1].Status != results.StatusFlag || s.Hosts[0].Status == results.StatusFlag || s.Hosts[3].Status != results.StatusFailed {
		t.Errorf("statuses %s %s %s", s.Hosts[0].Status, s.Hosts[1].Status, s.Hosts[3].Status)
	}
}

func TestCompareNodesLowSamplesGuard(t *testing.T) {
	few := healthy()
	few.requests = 12
	s := Merge(&results.Summary{}, []Outcome{{Host: "a", Summary: oneHost(few)}, {Host: "b", Summary: oneHost(few.scaled(0.5))}}, nil, 1)
	judge.CompareNodes(s, compare.LLMGuards(), judge.DefaultConfig().GEMMGuardsFrom())
	for _, h := range s.Hosts {
		if len(h.Flags) > 0 {
			t.Errorf("low-sample comparison flagged %s: %v", h.Name, h.Flags)
		}
	}
}

func TestManifest(t *testing.T) {
	dir := t.TempDir()
	m, err := NewManifest(dir, "kubernetes", "20260101T000000Z", map[string]string{"context": "local"})
	if err != nil {
		t.Fatal(err)
	}
	ns := Object{Kind: "Namespace", Name: "gpuvet-x"}
	pod := Object{Kind: "Pod", Namespace: "gpuvet-x", Name: "engine-0", Host: "n1"}
	if err := m.Record(ns); err != nil {
		t.Fatal(err)
	}
	if err := m.Record(pod); err != nil {
		t.Fatal(err)
	}
	// A killed run leaves the file: a second gpuvet reads it back.
	ms, err := Manifests(dir, "kubernetes", "")
	if err != nil || len(ms) != 1 {
		t.Fatalf("manifests %v %v", ms, err)
	}
	live := ms[0].Live()
	if len(live) != 2 || live[0].Kind != "Pod" || ms[0].Target["context"] != "local" {
		t.Errorf("live %v (want newest first)", live)
	}
	if err := m.Finish(); err == nil || !strings.Contains(err.Error(), "gpuvet clean --run 20260101T000000Z") {
		t.Errorf("finish with live objects: %v", err)
	}
	m.Deleted(pod)
	m.Deleted(ns)
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	if ms, _ := Manifests(dir, "", ""); len(ms) != 0 {
		t.Errorf("manifest left after a clean finish: %v", ms)
	}
	if _, err := NewManifest(dir+"/\x00bad", "k", "r", nil); err == nil || !strings.Contains(err.Error(), "GPUVET_STATE_DIR") {
		t.Errorf("unwritable dir: %v", err)
	}
}

// One starved load among a node's endpoints does not silence the node: its median is taken over
// the figures that can decide. When most of them cannot, the node's figure cannot either.
func TestCompareNodesMedianOverDecidingFigures(t *testing.T) {
	starved := func(s *results.Summary, n int) *results.Summary {
		for i := 0; i < n; i++ {
			s.Hosts[0].Models[0].Endpoints[i].Load.Client.ClientLimited = true
		}
		return s
	}
	slow := healthy().scaled(0.3)
	for _, tc := range []struct {
		starved int
		flagged bool
	}{{0, true}, {1, true}, {3, false}} {
		outs := []Outcome{
			{Host: "node-a", Summary: oneHost(healthy(), healthy(), healthy(), healthy())},
			{Host: "node-b", Summary: starved(oneHost(slow, slow, slow, slow), tc.starved)},
		}
		s := Merge(&results.Summary{RunID: "r"}, outs, nil, 1)
		judge.CompareNodes(s, compare.LLMGuards(), judge.DefaultConfig().GEMMGuardsFrom())
		flagged := false
		for _, f := range s.Hosts[1].Flags {
			flagged = flagged || f.Check == judge.CheckNodeToNode
		}
		if flagged != tc.flagged {
			t.Errorf("%d of 4 endpoints client-limited: node-b flagged %v, want %v; comparisons %+v", tc.starved, flagged, tc.flagged, s.Fleet.Comparisons)
		}
	}
}

// A node whose GPUs another process shared is flagged busy by the judge, not compared: its slow
// figures say nothing of the node's hardware, and must neither flag it a straggler nor move the
// fleet's median.
func TestCompareNodesLeavesSharedGPUsOut(t *testing.T) {
	shared := oneHost(healthy().scaled(0.3), healthy().scaled(0.3))
	m := &shared.Hosts[0].Models[0]
	for i := range m.Endpoints {
		m.Endpoints[i].Busy = []results.Busy{{When: "before the engine", Reason: "busy: PID 4242 python3, 8.1 GiB"}}
	}
	for i := range shared.Hosts[0].Health.GPUs {
		b := &shared.Hosts[0].Health.GPUs[i].Bench[0]
		b.Value, b.Busy = b.Value*0.3, true
	}
	outs := []Outcome{
		{Host: "node-a", Summary: oneHost(healthy(), healthy())},
		{Host: "node-b", Summary: shared},
		{Host: "node-c", Summary: oneHost(healthy(), healthy())},
	}
	s := Merge(&results.Summary{RunID: "r"}, outs, nil, 1)
	judge.CompareNodes(s, compare.LLMGuards(), judge.DefaultConfig().GEMMGuardsFrom())
	for _, h := range s.Hosts {
		for _, f := range h.Flags {
			if f.Check == judge.CheckNodeToNode {
				t.Errorf("%s flagged node to node: %s", h.Name, f.Reason)
			}
		}
	}
	for _, c := range s.Fleet.Comparisons {
		for _, v := range c.Values {
			if v.Host == "node-b" {
				t.Errorf("%s: the shared node-b is in the comparison (%v)", c.Metric, v)
			}
		}
	}
}

// DeletedAll marks many objects in one write (a 1,000-node run ends with ~19,000 of them: one file
// rewrite each took minutes), matching them as same does (kind, name, namespace, host).
func TestManifestDeletedMany(t *testing.T) {
	m, err := NewManifest(t.TempDir(), "kubernetes", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var objs []Object
	for i := range 2000 {
		o := Object{Kind: "Job", Namespace: "ns", Name: fmt.Sprintf("load-%d", i), Host: "n"}
		if err := m.Record(o); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	keep := Object{Kind: "Pod", Namespace: "ns", Name: "load-0", Host: "n"}
	if err := m.Record(keep); err != nil {
		t.Fatal(err)
	}
	live := m.Live()
	if err := m.DeletedAll(objs); err != nil {
		t.Fatal(err)
	}
	if l := m.Live(); len(l) != 1 || l[0].key() != keep.key() || len(live) != 2001 {
		t.Errorf("live after deleting 2000 of 2001: %v (before %d)", l, len(live))
	}
	back, err := ReadManifest(m.Path())
	if err != nil || len(back.Live()) != 1 {
		t.Errorf("the file: %v, %d live", err, len(back.Live()))
	}
}

// Each host chose its own GPUs at once (auto reads the host's CPU, or a Kubernetes node's
// allocatable CPU): the merge keeps every host's choice, and the fleet's count is the most any
// host loaded, not the plan's "auto" read as one.
func TestMergeKeepsEachHostsGPUsAtOnce(t *testing.T) {
	with := func(gpus int) *results.Summary {
		s := oneHost(healthy())
		s.Meta.ParallelGPUs = gpus
		s.Meta.Parallel = &results.ParallelChoice{Mode: "auto", GPUs: gpus, Slots: 8, Reason: fmt.Sprintf("auto: %d of 8", gpus)}
		return s
	}
	s := Merge(&results.Summary{}, []Outcome{{Host: "a", Summary: with(2)}, {Host: "b", Summary: with(8)}, {Host: "c", Err: errors.New("gone"), Phase: PhaseProvision}}, nil, 2)
	if s.Meta.ParallelGPUs != 8 {
		t.Errorf("fleet meta.parallel_gpus %d, want 8 (the most any host loaded)", s.Meta.ParallelGPUs)
	}
	for i, want := range []int{2, 8, 0} {
		p := s.Hosts[i].Parallel
		if (want == 0) != (p == nil) || (p != nil && p.GPUs != want) {
			t.Errorf("host %s: parallel %+v, want %d at once", s.Hosts[i].Name, p, want)
		}
	}
	fixed := Merge(&results.Summary{Meta: results.Meta{ParallelGPUs: 4}}, []Outcome{{Host: "a", Summary: with(2)}}, nil, 1)
	if fixed.Meta.ParallelGPUs != 4 {
		t.Errorf("a fixed plan count: %d, want the plan's 4", fixed.Meta.ParallelGPUs)
	}
}

// Issue 51: a host the run never reached said "cleaned up"; its Cleanup says it made nothing, and
// that is neither a cleanup failure nor a claim of one done.
func TestNothingMadeIsNotCleanedUp(t *testing.T) {
	down := &fakeHost{name: "down", provErr: errors.New("dial tcp: connection refused"), madeNothing: true}
	var lines []string
	out := Run(context.Background(), []Host{down}, Options{Parallel: 1, Progress: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }})
	said := strings.Join(lines, "\n")
	if out[0].CleanErr != nil || !strings.Contains(said, "down: nothing to clean up: nothing was made there") || strings.Contains(said, "cleaned up") {
		t.Errorf("clean error %v, said:\n%s", out[0].CleanErr, said)
	}
}
