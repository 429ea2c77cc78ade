package slurm

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// fakeSlurm answers `scontrol -o show node N` from nodes and records every other command.
type fakeSlurm struct {
	nodes map[string]string // name → its scontrol line
	calls []string
}

func (f *fakeSlurm) Run(_ context.Context, name string, args ...string) (string, error) {
	line := name + " " + strings.Join(args, " ")
	if strings.HasPrefix(line, "scontrol -o show node ") {
		n := args[len(args)-1]
		if l, ok := f.nodes[n]; ok {
			return l + "\n", nil
		}
		return "", fmt.Errorf("Node %s not found", n)
	}
	f.calls = append(f.calls, line)
	return "", nil
}

func idleNode(n string) string {
	return "NodeName=" + n + " Arch=x86_64 Gres=gpu:8 State=IDLE Partitions=gpu"
}

func verdictFleet(t *testing.T, c config.Slurm, nodes ...string) (*Fleet, *fakeSlurm, *[]string) {
	t.Helper()
	fs := &fakeSlurm{nodes: map[string]string{}}
	m, err := fleet.NewManifest(t.TempDir(), "slurm", "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	f := &Fleet{Config: c, Slurm: fs, StateDir: t.TempDir(), cluster: "c1", vetted: map[string]bool{},
		run: fleet.RunInfo{ID: "r1", Manifest: m, Say: func(l string) { said = append(said, l) }}}
	for _, n := range nodes {
		fs.nodes[n] = idleNode(n)
		f.vetted[n] = true
	}
	return f, fs, &said
}

func summaryOf(st map[string]results.Status) *results.Summary {
	s := &results.Summary{RunID: "r1"}
	for _, n := range sortedKeys(st) {
		s.Hosts = append(s.Hosts, wholeHost(n, st[n], 8))
	}
	return s
}

// wholeHost is a node vetted whole: 8 GPUs found, served gpus of them, health run.
func wholeHost(name string, st results.Status, served int) results.Host {
	h := results.Host{Name: name, Status: st, Error: "gemm_bf16 0.41 of peak", Health: &results.Health{Status: st}}
	m := results.Model{Model: "m"}
	for i := range 8 {
		h.Discovery.GPUs = append(h.Discovery.GPUs, results.GPUInfo{Index: i})
		if i < served {
			m.Endpoints = append(m.Endpoints, results.Endpoint{GPUs: []int{i}})
		}
	}
	h.Models = []results.Model{m}
	return h
}

func defaults() config.Slurm {
	p, _ := config.Load(config.Options{})
	return p.Config.Slurm
}

// One failed node of ten is drained with its reason (recorded first); ok and flagged ones are not
// (drain_failed only).
func TestApplyVerdictsDrainsFailed(t *testing.T) {
	c := defaults()
	c.DrainFailed = true
	names := []string{"n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10"}
	f, fs, _ := verdictFleet(t, c, names...)
	st := map[string]results.Status{}
	for _, n := range names {
		st[n] = results.StatusOK
	}
	st["n03"], st["n04"] = results.StatusFailed, results.StatusFlag
	if err := f.ApplyVerdicts(context.Background(), summaryOf(st)); err != nil {
		t.Fatal(err)
	}
	if len(fs.calls) != 1 || !strings.HasPrefix(fs.calls[0], "scontrol update nodename=n03 state=drain reason=gpuvet r1: failed: gemm_bf16 0.41 of peak") {
		t.Fatalf("calls %q", fs.calls)
	}
	d, _ := ReadDrains(f.StateDir)
	if r, ok := d.Nodes["c1/n03"]; !ok || r.RunID != "r1" || len(d.Nodes) != 1 {
		t.Fatalf("record %+v", d.Nodes)
	}
}

// The circuit breaker (slurm.max_drain 10 % of 10 nodes: 1): the failed node is drained before
// the flagged ones, the rest are only reported (held, in the summary's node actions) and the run
// fails saying so (exit 1).
func TestApplyVerdictsBreaker(t *testing.T) {
	c := defaults()
	c.DrainFlagged = true
	f, fs, said := verdictFleet(t, c, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	s := summaryOf(map[string]results.Status{"a": results.StatusFlag, "b": results.StatusFailed, "c": results.StatusFlag, "d": results.StatusOK})
	err := f.ApplyVerdicts(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "circuit breaker: 3 of 10 nodes failed (limit 10 %)") || !strings.Contains(err.Error(), "slurm.max_drain") {
		t.Fatalf("err %v", err)
	}
	drained := fs.drained()
	if len(drained) != 1 || drained[0] != "b" {
		t.Fatalf("drained %v, want only the failed node b\n%q", drained, *said)
	}
	acts := map[string]results.NodeAction{}
	for _, a := range s.Fleet.NodeActions {
		acts[a.Node] = a
	}
	if len(acts["b"].Did) != 1 || acts["a"].Held == "" || acts["c"].Held == "" || len(acts["a"].Did) != 0 {
		t.Fatalf("node actions %+v", s.Fleet.NodeActions)
	}
}

// A dry run says each drain and takes none.
func TestApplyVerdictsDryRun(t *testing.T) {
	c := defaults()
	c.DrainFlagged, c.DryRun = true, true
	f, fs, said := verdictFleet(t, c, "a", "b")
	if err := f.ApplyVerdicts(context.Background(), summaryOf(map[string]results.Status{"a": results.StatusFlag, "b": results.StatusOK})); err != nil {
		t.Fatal(err)
	}
	if len(fs.calls) != 0 {
		t.Fatalf("a dry run acted: %q", fs.calls)
	}
	if !strings.Contains(strings.Join(*said, "\n"), "dry run: would drain a: scontrol update nodename=a state=drain reason=") {
		t.Fatalf("said %q", *said)
	}
	if d, _ := ReadDrains(f.StateDir); len(d.Nodes) != 0 {
		t.Fatalf("a dry run recorded drains: %+v", d.Nodes)
	}
}

// A node someone drained while the run went is left alone, and said.
func TestApplyVerdictsLeavesOthersDrain(t *testing.T) {
	c := defaults()
	c.DrainFailed = true
	f, fs, said := verdictFleet(t, c, "a", "b")
	fs.nodes["a"] = "NodeName=a Gres=gpu:8 State=IDLE+DRAIN Reason=hw ticket 42 [ops@2026-12-03T01:00:00]"
	if err := f.ApplyVerdicts(context.Background(), summaryOf(map[string]results.Status{"a": results.StatusFailed, "b": results.StatusOK})); err != nil {
		t.Fatal(err)
	}
	if len(fs.calls) != 0 || !strings.Contains(strings.Join(*said, "\n"), `already drained by ops ("hw ticket 42"): left alone`) {
		t.Fatalf("calls %q said %q", fs.calls, *said)
	}
}

// gpuvet's drain is its own only while the node carries the very reason it recorded.
func TestDrainsOurs(t *testing.T) {
	d := &Drains{Nodes: map[string]Drain{"c1/a": {RunID: "r0", Reason: "gpuvet r0: failed: x"}}}
	mk := func(state, reason string) Node {
		ns, err := ParseNodes("NodeName=a Gres=gpu:8 State=" + state + " Reason=" + reason + " [root@t]")
		if err != nil {
			t.Fatal(err)
		}
		return ns[0]
	}
	if !d.Ours("c1", mk("IDLE+DRAIN", "gpuvet r0: failed: x")) {
		t.Error("gpuvet's own drain not recognised")
	}
	if d.Ours("c2", mk("IDLE+DRAIN", "gpuvet r0: failed: x")) {
		t.Error("another cluster's node taken for ours")
	}
	if d.Ours("c1", mk("IDLE+DRAIN", "gpuvet r0: failed: x, and ops agree")) {
		t.Error("a reason someone rewrote taken for ours")
	}
	if d.Ours("c1", mk("IDLE", "gpuvet r0: failed: x")) {
		t.Error("a node not drained taken for a drain of ours")
	}
}

// A node gpuvet drained and vetted again under the run's reservation: ok resumes it (it stays
// resumed, gpuvet's record forgets it); anything short of ok puts gpuvet's drain back as it was.
// The reservation goes either way, after the nodes.
func TestApplyVerdictsResumesOnlyOnOK(t *testing.T) {
	for _, st := range []results.Status{results.StatusOK, results.StatusInconclusive, results.StatusFlag} {
		f, fs, said, _ := drainedBefore(t)
		if err := f.ApplyVerdicts(context.Background(), summaryOf(map[string]results.Status{"a": st})); err != nil {
			t.Fatal(err)
		}
		calls := strings.Join(fs.calls, "\n")
		redrain := strings.Contains(calls, "scontrol update nodename=a state=drain reason=gpuvet r0: failed: x")
		if redrain == (st == results.StatusOK) {
			t.Errorf("%s: drain put back %v (calls %q)", st, redrain, fs.calls)
		}
		if !strings.HasSuffix(calls, "scontrol delete reservation=gpuvet-r1") {
			t.Errorf("%s: the reservation was not deleted last: %q", st, fs.calls)
		}
		d, _ := ReadDrains(f.StateDir)
		if _, kept := d.Nodes["c1/a"]; kept == (st == results.StatusOK) {
			t.Errorf("%s: record kept %v", st, kept)
		}
		if st == results.StatusOK && !strings.Contains(strings.Join(*said, "\n"), "a: ok: resumed (gpuvet drained it in run r0)") {
			t.Errorf("resume not said: %q", *said)
		}
		if live := f.run.Manifest.Live(); len(live) != 0 {
			t.Errorf("%s: manifest still lists %v", st, live)
		}
	}
}

// drained are the nodes an scontrol update drained, in order.
func (f *fakeSlurm) drained() []string {
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, "scontrol update nodename=") && strings.Contains(c, "state=drain") {
			n, _, _ := strings.Cut(strings.TrimPrefix(c, "scontrol update nodename="), " ")
			out = append(out, n)
		}
	}
	return out
}

// Writers of the record at once (two runs, or a run and a node's health check) lose none of
// each other's entries: each change is made under the record's lock.
func TestUpdateDrainsConcurrentWritersLoseNothing(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := UpdateDrains(dir, func(d *Drains) error {
				d.Nodes[drainKey("c1", fmt.Sprintf("n%02d", i))] = Drain{RunID: "r", Reason: "gpuvet r: failed: x"}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	d, err := ReadDrains(dir)
	if err != nil || len(d.Nodes) != 40 {
		t.Fatalf("%d entries of 40: %v", len(d.Nodes), err)
	}
}

// A record whose lock another process holds past the bound (stuck on a hung file system) fails the
// change, naming the lock and how to find its holder, instead of waiting with it; once the lock is
// free the change is made.
func TestUpdateDrainsLockWaitIsBounded(t *testing.T) {
	defer func(w time.Duration) { drainsLockWait = w }(drainsLockWait)
	drainsLockWait = 200 * time.Millisecond
	dir := t.TempDir()
	if err := UpdateDrains(dir, func(*Drains) error { return nil }); err != nil {
		t.Fatal(err)
	}
	held, err := os.OpenFile(DrainsPath(dir)+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX); err != nil { // another open file: another holder
		t.Fatal(err)
	}
	change := func(d *Drains) error { d.Nodes[drainKey("c1", "n1")] = Drain{RunID: "r"}; return nil }
	err = UpdateDrains(dir, change)
	if err == nil || !strings.Contains(err.Error(), "another process has held this lock for 200ms") || !strings.Contains(err.Error(), "fuser "+DrainsPath(dir)+".lock") {
		t.Fatalf("a held lock: %v", err)
	}
	syscall.Flock(int(held.Fd()), syscall.LOCK_UN)
	if err := UpdateDrains(dir, change); err != nil {
		t.Fatalf("a free lock: %v", err)
	}
	if d, _ := ReadDrains(dir); len(d.Nodes) != 1 {
		t.Errorf("the change after the lock was freed: %v", d.Nodes)
	}
}

// Issue 52: an ok run on 2 of a node's 8 GPUs without health resumed a node gpuvet drained. It
// keeps gpuvet's drain now, and says why; the whole node, with health, resumes it (above).
func TestPartialOKDoesNotResume(t *testing.T) {
	f, fs, said, old := drainedBefore(t)
	h := wholeHost("a", results.StatusOK, 2)
	h.Health = nil
	s := &results.Summary{RunID: "r1", Hosts: []results.Host{h}}
	if err := f.ApplyVerdicts(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(fs.calls, "\n"), "scontrol update nodename=a state=drain reason=gpuvet r0: failed: x") {
		t.Errorf("gpuvet's drain not put back: %q", fs.calls)
	}
	if got := strings.Join(*said, "\n"); !strings.Contains(got, "a: ok, but not resumed: the run served 2 of its 8 GPUs and had no health phase") || strings.Contains(got, "resumed (gpuvet drained") {
		t.Errorf("said %q", got)
	}
	if d, _ := ReadDrains(f.StateDir); d.Nodes["c1/a"].Reason != old.Reason {
		t.Errorf("gpuvet's record of its drain lost: %+v", d.Nodes)
	}
}

// drainedBefore is a fleet whose node a gpuvet drained in run r0, resumed by this run (r1) under
// its reservation to be vetted again, as ApplyVerdicts finds it.
func drainedBefore(t *testing.T) (*Fleet, *fakeSlurm, *[]string, Drain) {
	c := defaults()
	c.DrainFailed = true
	f, fs, said := verdictFleet(t, c, "a")
	old := Drain{RunID: "r0", Reason: "gpuvet r0: failed: x"}
	d, _ := ReadDrains(f.StateDir)
	d.Nodes["c1/a"] = old
	d.Save()
	resv := fleet.Object{Kind: KindResv, Name: "gpuvet-r1"}
	f.resv, f.resumed = &resv, map[string]Drain{"a": old}
	f.run.Manifest.Record(resv)
	f.run.Manifest.Record(fleet.Object{Kind: KindResumed, Name: "a", On: "gpuvet-r1"})
	return f, fs, said, old
}
