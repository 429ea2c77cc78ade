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
)

// node is a fake virtualization node: a /sys/bus/pci tree with NVIDIA GPUs on vfio-pci (driverctl
// overrides persisted, as one-deploy leaves them), a kernel that applies bind, unbind and
// drivers_probe writes the way the real one does, a systemctl that keeps nvidia-persistenced's
// state and a modprobe that loads the nvidia driver. Debian's real driverctl (a bash script with
// /sys and /etc/driverctl.d fixed in it, no root prefix) runs against the tree inside a mount
// namespace of its own where the tree is bind-mounted on /sys and a conf folder on /etc/driverctl.d.
type node struct {
	t                   *testing.T
	dir, sys, conf, dev string
	bin                 string
	mu                  sync.Mutex
	events              []string
	wedge               map[string]bool // a bind of these addresses never happens
	stop                chan struct{}
	done                chan struct{}
	persistencedWedged  bool
}

func newNode(t *testing.T, gpus ...string) *node {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("vfio tests skipped: they run driverctl in a mount namespace (root)")
	}
	if _, err := exec.LookPath("driverctl"); err != nil {
		t.Skip("vfio tests skipped: no driverctl (apt-get install driverctl)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("vfio tests skipped: no unshare (util-linux)")
	}
	if _, err := os.Stat("/etc/driverctl.d"); err != nil {
		t.Skip("vfio tests skipped: no /etc/driverctl.d to mount the test's over (driverctl's package makes it)")
	}
	dir := t.TempDir()
	n := &node{t: t, dir: dir, sys: filepath.Join(dir, "sys"), conf: filepath.Join(dir, "driverctl.d"), dev: filepath.Join(dir, "dev"),
		bin: filepath.Join(dir, "bin"), wedge: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, d := range []string{n.conf, n.bin, filepath.Join(n.dev, "vfio"), filepath.Join(n.sys, "module", "vfio-pci"),
		filepath.Join(n.sys, "bus/pci/drivers/vfio-pci"), filepath.Join(n.dir, "state")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(n.sys, ".gpuvet-fake"), nil, 0o644))
	for _, f := range []string{"bind", "unbind"} {
		must(t, os.WriteFile(filepath.Join(n.sys, "bus/pci/drivers/vfio-pci", f), nil, 0o200))
	}
	must(t, os.WriteFile(filepath.Join(n.sys, "bus/pci/drivers_probe"), nil, 0o200))
	for i, a := range gpus {
		n.addGPU(a, 20+i)
	}
	// An NVIDIA GPU's audio function and a non-NVIDIA device: never touched.
	n.addDevice("0000:03:00.0", "0x8086", "0x020000", 3)
	n.script("systemctl", `st=`+n.dir+`/state/persistenced
case "$1 $2" in
  "is-active nvidia-persistenced") if [ -f $st ]; then echo active; else echo inactive; exit 3; fi ;;
  "stop nvidia-persistenced") rm -f $st; echo "systemctl stop" >> `+n.dir+`/state/log ;;
  "start nvidia-persistenced") touch $st; echo "systemctl start" >> `+n.dir+`/state/log ;;
  *) echo "fake systemctl: $*" >&2; exit 1 ;;
esac`)
	n.script("modprobe", `[ "$1" = nvidia ] || { echo "fake modprobe: $*" >&2; exit 1; }
mkdir -p /sys/module/nvidia /sys/bus/pci/drivers/nvidia && touch /sys/bus/pci/drivers/nvidia/bind /sys/bus/pci/drivers/nvidia/unbind`)
	go n.kernel()
	t.Cleanup(func() { close(n.stop); <-n.done })
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (n *node) script(name, body string) {
	must(n.t, os.WriteFile(filepath.Join(n.bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
}

// addGPU adds an H200 at addr in IOMMU group grp, on vfio-pci with driverctl's persisted override.
func (n *node) addGPU(addr string, grp int) {
	n.addDevice(addr, "0x10de", "0x030200", grp)
	d := filepath.Join(n.sys, "devices/pci0000:00", addr)
	must(n.t, os.WriteFile(filepath.Join(d, "driver_override"), []byte("vfio-pci\n"), 0o644))
	n.link(addr, "vfio-pci")
	must(n.t, os.WriteFile(filepath.Join(n.conf, "pci-"+addr), []byte("vfio-pci\n"), 0o644))
	must(n.t, os.WriteFile(filepath.Join(n.dev, "vfio", fmt.Sprint(grp)), nil, 0o600))
}

func (n *node) addDevice(addr, vendor, class string, grp int) {
	d := filepath.Join(n.sys, "devices/pci0000:00", addr)
	must(n.t, os.MkdirAll(d, 0o755))
	must(n.t, os.WriteFile(filepath.Join(d, "vendor"), []byte(vendor+"\n"), 0o444))
	must(n.t, os.WriteFile(filepath.Join(d, "class"), []byte(class+"\n"), 0o444))
	must(n.t, os.WriteFile(filepath.Join(d, "driver_override"), []byte("(null)\n"), 0o644))
	g := filepath.Join(n.sys, "kernel/iommu_groups", fmt.Sprint(grp))
	must(n.t, os.MkdirAll(g, 0o755))
	must(n.t, os.Symlink("../../../kernel/iommu_groups/"+fmt.Sprint(grp), filepath.Join(d, "iommu_group")))
	must(n.t, os.MkdirAll(filepath.Join(n.sys, "bus/pci/devices"), 0o755))
	must(n.t, os.Symlink("../../../devices/pci0000:00/"+addr, filepath.Join(n.sys, "bus/pci/devices", addr)))
}

// link binds addr to drv in the tree (what the kernel does on a successful bind).
func (n *node) link(addr, drv string) {
	d := filepath.Join(n.sys, "devices/pci0000:00", addr)
	_ = os.Remove(filepath.Join(d, "driver"))
	must(n.t, os.Symlink("../../../bus/pci/drivers/"+drv, filepath.Join(d, "driver")))
	_ = os.Symlink("../../../../devices/pci0000:00/"+addr, filepath.Join(n.sys, "bus/pci/drivers", drv, addr))
}

func (n *node) driver(addr string) string {
	l, err := os.Readlink(filepath.Join(n.sys, "devices/pci0000:00", addr, "driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(l)
}

func (n *node) override(addr string) string {
	b, _ := os.ReadFile(filepath.Join(n.sys, "devices/pci0000:00", addr, "driver_override"))
	s := strings.TrimSpace(string(b))
	if s == "(null)" {
		return ""
	}
	return s
}

func (n *node) persisted(addr string) string {
	b, _ := os.ReadFile(filepath.Join(n.conf, "pci-"+addr))
	return strings.TrimSpace(string(b))
}

func (n *node) event(e string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, e)
}

func (n *node) log() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	b, _ := os.ReadFile(filepath.Join(n.dir, "state/log"))
	return append(slices.Clone(n.events), strings.Fields(strings.ReplaceAll(string(b), "systemctl ", "systemctl_"))...)
}

// kernel applies the writes to bind, unbind and drivers_probe files, as sysfs does. A bind while
// nvidia-persistenced runs wedges (never happens): what the real one does to a vfio rebind.
func (n *node) kernel() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			return
		case <-time.After(5 * time.Millisecond):
		}
		drivers, _ := os.ReadDir(filepath.Join(n.sys, "bus/pci/drivers"))
		for _, d := range drivers {
			for _, op := range []string{"unbind", "bind"} {
				for _, addr := range n.take(filepath.Join(n.sys, "bus/pci/drivers", d.Name(), op)) {
					if op == "unbind" && n.driver(addr) == d.Name() {
						_ = os.Remove(filepath.Join(n.sys, "devices/pci0000:00", addr, "driver"))
						_ = os.Remove(filepath.Join(n.sys, "bus/pci/drivers", d.Name(), addr))
						n.event("unbind:" + addr + ":" + d.Name())
					}
					if op == "bind" {
						n.bind(addr, d.Name())
					}
				}
			}
		}
		for _, addr := range n.take(filepath.Join(n.sys, "bus/pci/drivers_probe")) {
			drv := n.override(addr)
			if drv == "" {
				drv = "nvidia" // the driver whose id table matches an NVIDIA GPU, when loaded
			}
			n.bind(addr, drv)
		}
	}
}

func (n *node) bind(addr, drv string) {
	if n.driver(addr) != "" {
		return
	}
	if _, err := os.Stat(filepath.Join(n.sys, "bus/pci/drivers", drv)); err != nil {
		return
	}
	if o := n.override(addr); o != "" && o != drv {
		return
	}
	if _, err := os.Stat(filepath.Join(n.dir, "state/persistenced")); err == nil || n.wedgeFor(addr) {
		n.event("WEDGED:" + addr + ":" + drv)
		return
	}
	n.link(addr, drv)
	n.event("bind:" + addr + ":" + drv)
}

func (n *node) wedgeFor(addr string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.wedge[addr]
}

func (n *node) setWedge(addr string, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wedge[addr] = on
}

// take reads and empties a write-only sysfs file: the addresses written to it.
func (n *node) take(f string) []string {
	b, err := os.ReadFile(f)
	if err != nil || len(b) == 0 {
		return nil
	}
	_ = os.WriteFile(f, nil, 0o200)
	return strings.Fields(string(b))
}

// Run runs a script as on the node: the fake tree on /sys, the conf on /etc/driverctl.d, the fake
// systemctl and modprobe first on the PATH, in a mount namespace of its own. It refuses to run when
// the tree is not the one on /sys (never the real sysfs).
func (n *node) Run(ctx context.Context, script string) (string, error) {
	wrap := fmt.Sprintf(`mount --bind %s /sys && mount --bind %s /etc/driverctl.d || exit 99
[ -f /sys/.gpuvet-fake ] || { echo "not the fake tree" >&2; exit 99; }
export PATH=%s:$PATH
%s`, n.sys, n.conf, n.bin, script)
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "sh", "-c", wrap)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
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

// The whole cycle: release from vfio-pci with the override lifted, bind to nvidia, restore with
// the persisted override, persistenced stopped around every (re)bind and started again after.
func TestReleaseBindRestore(t *testing.T) {
	n := newNode(t, gpus...)
	must(t, os.WriteFile(filepath.Join(n.dir, "state/persistenced"), nil, 0o644)) // it ran before
	ctx := context.Background()
	r := &rec{}
	rl, err := Begin(ctx, n, Paths{Dev: n.dev}, nil, r, fleet.Object{Host: "root@node1:22"}, func(string) {})
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	if len(rl.GPUs) != 2 || len(r.objs) != 3 {
		t.Fatalf("released %v, recorded %v", rl.GPUs, r.objs)
	}
	for _, a := range gpus {
		if n.driver(a) != "" || n.override(a) != "" || n.persisted(a) != "" {
			t.Fatalf("%s after release: driver %q override %q persisted %q", a, n.driver(a), n.override(a), n.persisted(a))
		}
	}
	if n.driver("0000:03:00.0") != "" || n.override("0000:03:00.0") != "" {
		t.Fatal("a non-NVIDIA device was touched")
	}
	if err := rl.Bind(ctx); err != nil {
		t.Fatalf("Bind: %v\n%v", err, n.log())
	}
	for _, a := range gpus {
		if n.driver(a) != "nvidia" {
			t.Fatalf("%s on %q, want nvidia", a, n.driver(a))
		}
	}
	// The driver package started persistenced meanwhile: a rebind with it running wedges.
	must(t, os.WriteFile(filepath.Join(n.dir, "state/persistenced"), nil, 0o644))
	rl.Wait = 3 * time.Second
	if err := rl.Restore(ctx); err != nil {
		t.Fatalf("Restore: %v\n%v", err, n.log())
	}
	for _, a := range gpus {
		if n.driver(a) != "vfio-pci" || n.override(a) != "vfio-pci" || n.persisted(a) != "vfio-pci" {
			t.Fatalf("%s after restore: driver %q override %q persisted %q", a, n.driver(a), n.override(a), n.persisted(a))
		}
	}
	log := n.log()
	for _, e := range log {
		if strings.HasPrefix(e, "WEDGED") {
			t.Fatalf("a bind happened with persistenced running: %v", log)
		}
	}
	if _, err := os.Stat(filepath.Join(n.dir, "state/persistenced")); err != nil {
		t.Fatalf("persistenced, which ran before the release, was not started again: %v", log)
	}
	if len(r.gone) != 3 {
		t.Fatalf("manifest objects marked done: %v", r.gone)
	}
}

// A GPU a VM holds (its qemu has the /dev/vfio group open) or that OpenNebula says is attached is
// never released: the address and the holder are named, nothing changes.
func TestReleaseRefusesAttachedGPU(t *testing.T) {
	n := newNode(t, gpus...)
	f, err := os.Open(filepath.Join(n.dev, "vfio", "21"))
	must(t, err)
	qemu := exec.Command("sleep", "30")
	qemu.ExtraFiles = []*os.File{f}
	must(t, qemu.Start())
	t.Cleanup(func() { qemu.Process.Kill(); qemu.Wait(); f.Close() })
	r := &rec{}
	_, err = Begin(context.Background(), n, Paths{Dev: n.dev}, map[string]string{"0000:41:00.0": "VM 42 (RUNNING)"}, r, fleet.Object{}, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "0000:41:00.0 is attached to VM 42") ||
		!strings.Contains(err.Error(), fmt.Sprintf("0000:c1:00.0 (IOMMU group 21) is held by pid %d (sleep 30", qemu.Process.Pid)) {
		t.Fatalf("Begin: %v", err)
	}
	if len(r.objs) != 0 {
		t.Fatalf("recorded %v", r.objs)
	}
	for _, a := range gpus {
		if n.driver(a) != "vfio-pci" || n.persisted(a) != "vfio-pci" {
			t.Fatalf("%s changed", a)
		}
	}
}

// A restore that fails in the middle (one GPU's bind wedges) says so loudly, names the GPU, keeps
// its manifest object, and restores the others; Clean from the manifest finishes it later.
func TestRestoreFailureThenClean(t *testing.T) {
	n := newNode(t, gpus...)
	ctx := context.Background()
	r := &rec{}
	rl, err := Begin(ctx, n, Paths{Dev: n.dev}, nil, r, fleet.Object{Host: "root@node1:22"}, func(string) {})
	must(t, err)
	must(t, rl.Bind(ctx))
	n.setWedge("0000:41:00.0", true)
	rl.Wait = time.Second
	err = rl.Restore(ctx)
	if err == nil || !strings.Contains(err.Error(), "INCOMPLETE vfio restore") || !strings.Contains(err.Error(), "0000:41:00.0") || strings.Contains(err.Error(), "0000:c1:00.0") {
		t.Fatalf("Restore: %v", err)
	}
	if n.driver("0000:c1:00.0") != "vfio-pci" || n.persisted("0000:c1:00.0") != "vfio-pci" {
		t.Fatal("the GPU that could be restored was not")
	}
	if len(r.gone) != 1 || !strings.HasPrefix(r.gone[0].Name, "0000:c1:00.0") {
		t.Fatalf("marked done: %v", r.gone)
	}
	n.setWedge("0000:41:00.0", false)
	var left []fleet.Object
	for _, o := range r.objs {
		if !containsObj(r.gone, o) {
			left = append(left, o)
		}
	}
	done, err := Clean(ctx, n, Paths{Dev: n.dev}, left, func(string) {})
	if err != nil || len(done) != 1 {
		t.Fatalf("Clean: %v %v", done, err)
	}
	if n.driver("0000:41:00.0") != "vfio-pci" || n.override("0000:41:00.0") != "vfio-pci" || n.persisted("0000:41:00.0") != "vfio-pci" {
		t.Fatal("clean did not restore the wedged GPU")
	}
}

// A release that fails in the middle (the second GPU cannot be unbound) leaves the first GPU
// released and recorded: Restore puts both back as they were.
func TestReleaseFailureInTheMiddleRestores(t *testing.T) {
	n := newNode(t, gpus...)
	ctx := context.Background()
	// driverctl fails on the second GPU (as it does when an unbind is refused).
	n.script("driverctl", `case "$*" in *c1:00.0*) echo "driverctl: unbinding 0000:c1:00.0 failed" >&2; exit 1;; esac; exec /usr/sbin/driverctl "$@"`)
	r := &rec{}
	rl, err := Begin(ctx, n, Paths{Dev: n.dev}, nil, r, fleet.Object{}, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "0000:c1:00.0") {
		t.Fatalf("Begin: %v", err)
	}
	if n.driver("0000:41:00.0") != "" || n.persisted("0000:41:00.0") != "" {
		t.Fatal("the first GPU was not released before the failure")
	}
	must(t, os.Remove(filepath.Join(n.bin, "driverctl")))
	if err := rl.Restore(ctx); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	for _, a := range gpus {
		if n.driver(a) != "vfio-pci" || n.override(a) != "vfio-pci" || n.persisted(a) != "vfio-pci" {
			t.Fatalf("%s after restore: driver %q override %q persisted %q", a, n.driver(a), n.override(a), n.persisted(a))
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
