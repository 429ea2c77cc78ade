package vfio

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/vfio/vfiotest"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type rec struct {
	mu   sync.Mutex
	objs []fleet.Object
	gone []fleet.Object
}

func (r *rec) Record(o fleet.Object) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.objs = append(r.objs, o)
	return nil
}

func (r *rec) Deleted(o fleet.Object) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gone = append(r.gone, o)
	return nil
}

var gpus = []string{"0000:41:00.0", "0000:c1:00.0"}

// paths are the fake node's roots, with a /proc holding the nvidia driver's information file of
// each GPU (GPU i is /dev/nvidiaI) and a state folder for the node's own records.
func paths(t *testing.T, n *vfiotest.Node) Paths {
	t.Helper()
	proc := t.TempDir()
	for i, a := range gpus {
		d := filepath.Join(proc, "driver/nvidia/gpus", a)
		must(t, os.MkdirAll(d, 0o755))
		must(t, os.WriteFile(filepath.Join(d, "information"), []byte(fmt.Sprintf("Model: \t\t NVIDIA H100\nDevice Minor: \t %d\n", i)), 0o644))
		must(t, os.WriteFile(filepath.Join(n.Dev(), fmt.Sprintf("nvidia%d", i)), nil, 0o644))
	}
	return Paths{Dev: n.Dev(), Proc: proc, State: filepath.Join(t.TempDir(), "state")}
}

// The whole cycle: release from vfio-pci with the override lifted, bind to nvidia, restore with
// the persisted override, persistenced stopped around every (re)bind and started again after.
func TestReleaseBindRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	n := vfiotest.New(t, vfiotest.Options{}, gpus...)
	p := paths(t, n)
	n.SetPersistenced(true) // it ran before
	ctx := context.Background()
	r := &rec{}
	rl, err := Begin(ctx, n, p, nil, r, fleet.Object{Host: "root@node1:22"}, "r1", func(string) {})
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	if len(rl.GPUs) != 2 || len(r.objs) != 3 {
		t.Fatalf("released %v, recorded %v", rl.GPUs, r.objs)
	}
	for _, a := range gpus {
		if n.Driver(a) != "" || n.Override(a) != "" || n.Persisted(a) != "" {
			t.Fatalf("%s after release: driver %q override %q persisted %q", a, n.Driver(a), n.Override(a), n.Persisted(a))
		}
	}
	if n.Driver("0000:03:00.0") != "" || n.Override("0000:03:00.0") != "" {
		t.Fatal("a non-NVIDIA device was touched")
	}
	if err := rl.Bind(ctx); err != nil {
		t.Fatalf("Bind: %v\n%v", err, n.Log())
	}
	for _, a := range gpus {
		if n.Driver(a) != "nvidia" {
			t.Fatalf("%s on %q, want nvidia", a, n.Driver(a))
		}
	}
	// The driver package started persistenced meanwhile: a rebind with it running wedges.
	n.SetPersistenced(true)
	rl.Wait = 3 * time.Second
	if err := rl.Restore(ctx, nil); err != nil {
		t.Fatalf("Restore: %v\n%v", err, n.Log())
	}
	for _, a := range gpus {
		if n.Driver(a) != "vfio-pci" || n.Override(a) != "vfio-pci" || n.Persisted(a) != "vfio-pci" {
			t.Fatalf("%s after restore: driver %q override %q persisted %q", a, n.Driver(a), n.Override(a), n.Persisted(a))
		}
	}
	log := n.Log()
	for _, e := range log {
		if strings.HasPrefix(e, "WEDGED") {
			t.Fatalf("a bind happened with persistenced running: %v", log)
		}
	}
	if !n.PersistencedActive() {
		t.Fatalf("persistenced, which ran before the release, was not started again: %v", log)
	}
	if len(r.gone) != 3 {
		t.Fatalf("manifest objects marked done: %v", r.gone)
	}
}

// A GPU a VM holds (its qemu has the /dev/vfio group open) or that OpenNebula says is attached is
// never released: the address and the holder are named, nothing changes.
func TestReleaseRefusesAttachedGPU(t *testing.T) {
	n := vfiotest.New(t, vfiotest.Options{}, gpus...)
	p := paths(t, n)
	f, err := os.Open(filepath.Join(n.Dev(), "vfio", "21"))
	must(t, err)
	qemu := exec.Command("sleep", "600") // killed at cleanup; outlives any scan
	qemu.ExtraFiles = []*os.File{f}
	must(t, qemu.Start())
	f.Close() // the child holds the group now, alone: the test's own descriptor is not the holder to name
	t.Cleanup(func() { qemu.Process.Kill(); qemu.Wait() })
	r := &rec{}
	_, err = Begin(context.Background(), n, p, map[string]string{"0000:41:00.0": "VM 42 (RUNNING)"}, r, fleet.Object{}, "r1", func(string) {})
	if err == nil || !strings.Contains(err.Error(), "0000:41:00.0 is attached to VM 42") ||
		!strings.Contains(err.Error(), "0000:c1:00.0 (IOMMU group 21) is held by") || !strings.Contains(err.Error(), fmt.Sprintf("pid %d (sleep 600", qemu.Process.Pid)) {
		t.Fatalf("Begin: %v", err)
	}
	if len(r.objs) != 0 {
		t.Fatalf("recorded %v", r.objs)
	}
	for _, a := range gpus {
		if n.Driver(a) != "vfio-pci" || n.Persisted(a) != "vfio-pci" {
			t.Fatalf("%s changed", a)
		}
	}
}

// A restore that fails in the middle (one GPU's bind wedges) says so loudly, names the GPU, keeps
// its manifest object, and restores the others; Clean from the manifest finishes it later.
func TestRestoreFailureThenClean(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	n := vfiotest.New(t, vfiotest.Options{}, gpus...)
	p := paths(t, n)
	ctx := context.Background()
	r := &rec{}
	rl, err := Begin(ctx, n, p, nil, r, fleet.Object{Host: "root@node1:22"}, "r1", func(string) {})
	must(t, err)
	must(t, rl.Bind(ctx))
	n.SetWedge("0000:41:00.0", true)
	rl.Wait = time.Second
	err = rl.Restore(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "INCOMPLETE vfio restore") || !strings.Contains(err.Error(), "0000:41:00.0") || strings.Contains(err.Error(), "0000:c1:00.0") {
		t.Fatalf("Restore: %v", err)
	}
	if n.Driver("0000:c1:00.0") != "vfio-pci" || n.Persisted("0000:c1:00.0") != "vfio-pci" {
		t.Fatal("the GPU that could be restored was not")
	}
	if len(r.gone) != 1 || !strings.HasPrefix(r.gone[0].Name, "0000:c1:00.0") {
		t.Fatalf("marked done: %v", r.gone)
	}
	n.SetWedge("0000:41:00.0", false)
	var left []fleet.Object
	for _, o := range r.objs {
		if !slices.ContainsFunc(r.gone, o.Same) {
			left = append(left, o)
		}
	}
	done, err := Clean(ctx, n, p, "r1", left, func(string) {})
	if err != nil || len(done) != 1 {
		t.Fatalf("Clean: %v %v", done, err)
	}
	if n.Driver("0000:41:00.0") != "vfio-pci" || n.Override("0000:41:00.0") != "vfio-pci" || n.Persisted("0000:41:00.0") != "vfio-pci" {
		t.Fatal("clean did not restore the wedged GPU")
	}
}

// A release that fails in the middle (the second GPU cannot be unbound) leaves the first GPU
// released and recorded: Restore puts both back as they were.
func TestReleaseFailureInTheMiddleRestores(t *testing.T) {
	n := vfiotest.New(t, vfiotest.Options{}, gpus...)
	p := paths(t, n)
	ctx := context.Background()
	// driverctl fails on the second GPU (as it does when an unbind is refused).
	n.Script("driverctl", `case "$*" in *c1:00.0*) echo "driverctl: unbinding 0000:c1:00.0 failed" >&2; exit 1;; esac; exec /usr/sbin/driverctl "$@"`)
	r := &rec{}
	rl, err := Begin(ctx, n, p, nil, r, fleet.Object{}, "r1", func(string) {})
	if err == nil || !strings.Contains(err.Error(), "0000:c1:00.0") {
		t.Fatalf("Begin: %v", err)
	}
	if n.Driver("0000:41:00.0") != "" || n.Persisted("0000:41:00.0") != "" {
		t.Fatal("the first GPU was not released before the failure")
	}
	must(t, os.Remove(filepath.Join(n.Bin(), "driverctl")))
	if err := rl.Restore(ctx, nil); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	for _, a := range gpus {
		if n.Driver(a) != "vfio-pci" || n.Override(a) != "vfio-pci" || n.Persisted(a) != "vfio-pci" {
			t.Fatalf("%s after restore: driver %q override %q persisted %q", a, n.Driver(a), n.Override(a), n.Persisted(a))
		}
	}
}

func TestParseBindingRefusesEditedNames(t *testing.T) {
	for _, s := range []string{"0000:41:00.0 driver=vfio-pci override=persistent", "0000:41:00.0 driver=vfio-pci override=none"} {
		if _, err := parseBinding(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"", "0000:41:00.0", "../../x driver=vfio-pci override=none", "0000:41:00.0; rm -rf / driver=vfio-pci override=none",
		"0000:41:00.0 driver=nvidia override=none", "0000:41:00.0 driver=vfio-pci override=maybe"} {
		if _, err := parseBinding(s); err == nil {
			t.Fatalf("%q accepted", s)
		}
	}
}

// An edited manifest cannot put another device on vfio-pci: only the node's NVIDIA GPUs are bound,
// even when the node's record names it; without a record nothing is touched at all.
func TestCleanRefusesADeviceThatIsNotAGPU(t *testing.T) {
	n := vfiotest.New(t, vfiotest.Options{}, gpus...)
	p := paths(t, n)
	forged := fleet.Object{Kind: KindBinding, Name: "0000:03:00.0 driver=vfio-pci override=persistent"}
	done, err := Clean(context.Background(), n, p, "r1", []fleet.Object{forged}, func(string) {})
	if err != nil || len(done) != 1 || n.Override("0000:03:00.0") != "" {
		t.Fatalf("no record: %v %v", done, err)
	}
	must(t, os.MkdirAll(p.State, 0o755))
	must(t, os.WriteFile(filepath.Join(p.State, "vfio-r1"), []byte(KindBinding+" "+forged.Name+"\n"), 0o600))
	done, err = Clean(context.Background(), n, p, "r1", []fleet.Object{forged}, func(string) {})
	if err == nil || len(done) != 0 || !strings.Contains(err.Error(), "0000:03:00.0 is not an NVIDIA GPU of the node") {
		t.Fatalf("Clean: %v %v", done, err)
	}
	if n.Override("0000:03:00.0") != "" || n.Persisted("0000:03:00.0") != "" {
		t.Fatal("the NIC got an override")
	}
}

// killedRun releases the node's GPUs and binds them to nvidia, as a run killed after its start
// leaves them; it returns the manifest objects.
func killedRun(t *testing.T, n *vfiotest.Node, p Paths) []fleet.Object {
	t.Helper()
	r := &rec{}
	rl, err := Begin(context.Background(), n, p, nil, r, fleet.Object{Host: "root@node1:22"}, "r1", func(string) {})
	must(t, err)
	must(t, rl.Bind(context.Background()))
	return r.objs
}

func countEvents(n *vfiotest.Node, e string) int {
	c := 0
	for _, l := range n.Log() {
		if strings.Contains(l, e) {
			c++
		}
	}
	return c
}

// Finding 3 of issue 43: a stale manifest (its run's restore done, the node's record gone) moves
// nothing: a GPU serving on nvidia since stays there, and persistenced is not stopped.
func TestCleanStaleManifestMovesNothing(t *testing.T) {
	n := vfiotest.New(t, vfiotest.Options{}, gpus...)
	p := paths(t, n)
	n.SetPersistenced(true)
	objs := killedRun(t, n, p)
	must(t, os.Remove(filepath.Join(p.State, "vfio-r1"))) // a finished run's: its record is gone
	n.SetPersistenced(true)
	stops := countEvents(n, "systemctl stop")
	done, err := Clean(context.Background(), n, p, "r1", objs, func(string) {})
	if err != nil || len(done) != len(objs) {
		t.Fatalf("Clean: %v %v", done, err)
	}
	for _, a := range gpus {
		if n.Driver(a) != "nvidia" || n.Persisted(a) != "" {
			t.Errorf("%s moved by a stale manifest: driver %q persisted %q", a, n.Driver(a), n.Persisted(a))
		}
	}
	if countEvents(n, "systemctl stop") != stops || !n.PersistencedActive() {
		t.Errorf("persistenced stopped for a stale manifest: %v", n.Log())
	}
}

// Finding 3: an edited object (not in the node's record) is refused and stops nothing; a GPU
// that serves on nvidia now (a process holds its /dev/nvidiaN) is not taken; the others are
// restored, and persistenced, which gpuvet stopped, runs again although the restore failed.
func TestCleanOnlyRecordedAndNotServing(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	n := vfiotest.New(t, vfiotest.Options{}, gpus...)
	p := paths(t, n)
	n.SetPersistenced(true) // it ran before the release
	objs := killedRun(t, n, p)
	edited := fleet.Object{Kind: KindBinding, Name: "0000:41:00.0 driver=vfio-pci override=runtime"}
	stops := countEvents(n, "systemctl stop")
	n.SetPersistenced(true)
	done, err := Clean(context.Background(), n, p, "r1", []fleet.Object{edited}, func(string) {})
	if err == nil || len(done) != 0 || !strings.Contains(err.Error(), "not in the node's record of run r1") {
		t.Fatalf("an edited object: %v %v", done, err)
	}
	if n.Driver("0000:41:00.0") != "nvidia" || countEvents(n, "systemctl stop") != stops || !n.PersistencedActive() {
		t.Fatalf("an edited object changed the node: driver %q, log %v", n.Driver("0000:41:00.0"), n.Log())
	}
	f, err := os.Open(filepath.Join(p.Dev, "nvidia0")) // 0000:41:00.0 serves
	must(t, err)
	engine := exec.Command("sleep", "30")
	engine.ExtraFiles = []*os.File{f}
	must(t, engine.Start())
	f.Close() // the engine holds it now, not the test
	t.Cleanup(func() { engine.Process.Kill(); engine.Wait() })
	done, err = Clean(context.Background(), n, p, "r1", objs, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "0000:41:00.0 is on nvidia and serving") || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", engine.Process.Pid)) {
		t.Fatalf("Clean with a serving GPU: %v", err)
	}
	if n.Driver("0000:41:00.0") != "nvidia" || n.Persisted("0000:41:00.0") != "" {
		t.Fatal("a serving GPU was taken")
	}
	if n.Driver("0000:c1:00.0") != "vfio-pci" || n.Persisted("0000:c1:00.0") != "vfio-pci" {
		t.Fatal("the idle GPU was not restored")
	}
	if !n.PersistencedActive() {
		t.Fatalf("persistenced not started again after a failed restore: %v", n.Log())
	}
	if len(done) != 2 { // the idle GPU and persistenced
		t.Fatalf("done %v", done)
	}
	if _, err := os.Stat(filepath.Join(p.State, "vfio-r1")); err != nil {
		t.Fatal("the node's record went before everything it names was back")
	}
	// The engine stops: the next clean finishes, and the record goes.
	engine.Process.Kill()
	engine.Wait()
	var left []fleet.Object
	for _, o := range objs {
		if !slices.ContainsFunc(done, o.Same) {
			left = append(left, o)
		}
	}
	if _, err := Clean(context.Background(), n, p, "r1", left, func(string) {}); err != nil {
		t.Fatal(err)
	}
	if n.Driver("0000:41:00.0") != "vfio-pci" {
		t.Fatal("not restored once idle")
	}
	if _, err := os.Stat(filepath.Join(p.State, "vfio-r1")); err == nil {
		t.Fatal("the node's record stays after everything is back")
	}
}
