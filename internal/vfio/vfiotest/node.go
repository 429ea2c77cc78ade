// Package vfiotest is a fake virtualization node for vfio tests: a /sys/bus/pci tree with NVIDIA
// GPUs on vfio-pci, a fake kernel that applies the tree's bind, unbind and drivers_probe writes, a
// systemctl for nvidia-persistenced and a modprobe for nvidia. Debian's real driverctl runs
// against it (Run: a mount namespace with the tree on /sys), or inside a chroot host with the tree
// mounted on its /sys.
package vfiotest

import (
	"cmp"
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
)

// Node is one fake node, its GPUs' driverctl overrides persisted as one-deploy leaves them. Debian's
// driverctl has /sys and /etc/driverctl.d fixed in it (no root prefix): Run bind-mounts the tree and
// a conf folder there, in a mount namespace of its own.
type Node struct {
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

func New(t *testing.T, o Options, gpus ...string) *Node {
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
	if _, err := os.Stat("/etc/driverctl.d"); err != nil && o.Conf == "" {
		t.Skip("vfio tests skipped: no /etc/driverctl.d to mount the test's over (driverctl's package makes it)")
	}
	dir := t.TempDir()
	n := &Node{t: t, dir: dir, sys: filepath.Join(dir, "sys"), conf: cmp.Or(o.Conf, filepath.Join(dir, "driverctl.d")), dev: filepath.Join(dir, "dev"),
		bin: filepath.Join(dir, "bin"), wedge: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, d := range []string{n.conf, n.bin, filepath.Join(n.dev, "vfio"), filepath.Join(n.sys, "module", "vfio-pci"),
		filepath.Join(n.sys, "bus/pci/drivers/vfio-pci"), n.state()} {
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
	n.Script("systemctl", `st=/sys/.gpuvet-state/persistenced
case "$1 $2" in
  "is-active nvidia-persistenced") if [ -f $st ]; then echo active; else echo inactive; exit 3; fi ;;
  "stop nvidia-persistenced") rm -f $st; echo "systemctl stop" >> /sys/.gpuvet-state/log ;;
  "start nvidia-persistenced") touch $st; echo "systemctl start" >> /sys/.gpuvet-state/log ;;
  *) echo "fake systemctl: $*" >&2; exit 1 ;;
esac`)
	n.Script("modprobe", `[ "$1" = nvidia ] || { echo "fake modprobe: $*" >&2; exit 1; }
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

// Script puts a command in the node's fake bin (first on Run's PATH).
func (n *Node) Script(name, body string) {
	must(n.t, os.WriteFile(filepath.Join(n.bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
}

// state is where the fake systemctl keeps nvidia-persistenced's state (also /sys/.gpuvet-state there).
func (n *Node) state() string { return filepath.Join(n.sys, ".gpuvet-state") }

// PersistencedActive says whether nvidia-persistenced runs; SetPersistenced starts or stops it
// (as a driver package does).
func (n *Node) PersistencedActive() bool {
	_, err := os.Stat(filepath.Join(n.state(), "persistenced"))
	return err == nil
}

func (n *Node) SetPersistenced(on bool) {
	p := filepath.Join(n.state(), "persistenced")
	if on {
		must(n.t, os.WriteFile(p, nil, 0o644))
	} else {
		_ = os.Remove(p)
	}
}

// Sys, Dev and Bin are the fake tree (mounted on /sys by Run), the /dev with the vfio groups, and
// the folder of fake commands.
func (n *Node) Sys() string { return n.sys }
func (n *Node) Dev() string { return n.dev }
func (n *Node) Bin() string { return n.bin }

// Conf is driverctl's configuration folder of the node (mounted on /etc/driverctl.d).
func (n *Node) Conf() string { return n.conf }

// Options shape a node.
type Options struct {
	// Conf is driverctl's configuration folder (default: one of the test's, mounted on
	// /etc/driverctl.d by Run); a chroot host's own /etc/driverctl.d when the node is one.
	Conf string
}

// addGPU adds an H200 at addr in IOMMU group grp, on vfio-pci with driverctl's persisted override.
func (n *Node) addGPU(addr string, grp int) {
	n.addDevice(addr, "0x10de", "0x030200", grp)
	d := filepath.Join(n.sys, "devices/pci0000:00", addr)
	must(n.t, os.WriteFile(filepath.Join(d, "driver_override"), []byte("vfio-pci\n"), 0o644))
	n.link(addr, "vfio-pci")
	must(n.t, os.WriteFile(filepath.Join(n.conf, "pci-"+addr), []byte("vfio-pci\n"), 0o644))
	must(n.t, os.WriteFile(filepath.Join(n.dev, "vfio", fmt.Sprint(grp)), nil, 0o600))
}

func (n *Node) addDevice(addr, vendor, class string, grp int) {
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
func (n *Node) link(addr, drv string) {
	d := filepath.Join(n.sys, "devices/pci0000:00", addr)
	_ = os.Remove(filepath.Join(d, "driver"))
	must(n.t, os.Symlink("../../../bus/pci/drivers/"+drv, filepath.Join(d, "driver")))
	_ = os.Symlink("../../../../devices/pci0000:00/"+addr, filepath.Join(n.sys, "bus/pci/drivers", drv, addr))
}

func (n *Node) Driver(addr string) string {
	l, err := os.Readlink(filepath.Join(n.sys, "devices/pci0000:00", addr, "driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(l)
}

func (n *Node) Override(addr string) string {
	b, _ := os.ReadFile(filepath.Join(n.sys, "devices/pci0000:00", addr, "driver_override"))
	s := strings.TrimSpace(string(b))
	if s == "(null)" {
		return ""
	}
	return s
}

func (n *Node) Persisted(addr string) string {
	b, _ := os.ReadFile(filepath.Join(n.conf, "pci-"+addr))
	return strings.TrimSpace(string(b))
}

func (n *Node) event(e string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, e)
}

func (n *Node) Log() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	b, _ := os.ReadFile(filepath.Join(n.state(), "log"))
	return append(slices.Clone(n.events), strings.Fields(strings.ReplaceAll(string(b), "systemctl ", "systemctl_"))...)
}

// kernel applies the writes to bind, unbind and drivers_probe files, as sysfs does. A bind while
// nvidia-persistenced runs wedges (never happens): what the real one does to a vfio rebind.
func (n *Node) kernel() {
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
					if op == "unbind" && n.Driver(addr) == d.Name() {
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
			drv := n.Override(addr)
			if drv == "" {
				drv = "nvidia" // the driver whose id table matches an NVIDIA GPU, when loaded
			}
			n.bind(addr, drv)
		}
	}
}

func (n *Node) bind(addr, drv string) {
	if n.Driver(addr) != "" {
		return
	}
	if _, err := os.Stat(filepath.Join(n.sys, "bus/pci/drivers", drv)); err != nil {
		return
	}
	if o := n.Override(addr); o != "" && o != drv {
		return
	}
	if n.PersistencedActive() || n.wedgeFor(addr) {
		n.event("WEDGED:" + addr + ":" + drv)
		return
	}
	n.link(addr, drv)
	n.event("bind:" + addr + ":" + drv)
}

func (n *Node) wedgeFor(addr string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.wedge[addr]
}

func (n *Node) SetWedge(addr string, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wedge[addr] = on
}

// take reads and empties a write-only sysfs file: the addresses written to it.
func (n *Node) take(f string) []string {
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
func (n *Node) Run(ctx context.Context, script string) (string, error) {
	wrap := fmt.Sprintf(`mount --bind %s /sys && mount --bind %s /etc/driverctl.d || exit 99
[ -f /sys/.gpuvet-fake ] || { echo "not the fake tree" >&2; exit 99; }
export PATH=%s:$PATH
%s`, n.sys, n.conf, n.bin, script)
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "sh", "-c", wrap)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// InstallInto copies the fake commands (systemctl, modprobe) into a chroot host's /usr/local/sbin,
// first on root's PATH there; the tree must then be mounted on the host's /sys (Mount).
func (n *Node) InstallInto(root string) {
	ents, err := os.ReadDir(n.bin)
	must(n.t, err)
	dst := filepath.Join(root, "usr/local/sbin")
	must(n.t, os.MkdirAll(dst, 0o755))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(n.bin, e.Name()))
		must(n.t, err)
		must(n.t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o755))
	}
}
