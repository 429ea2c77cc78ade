// Package vfio releases a virtualization node's NVIDIA GPUs from vfio-pci for a bare-metal run and
// restores the binding after: the node's passthrough setup (driverctl's persistent vfio-pci
// override, as OpenNebula's one-deploy makes it) is lifted, the GPUs go to the nvidia driver for the
// run, and then go back to vfio-pci with the override persisted as it was, verified. A GPU a running
// VM holds is never released (the process holding its /dev/vfio group is named); nvidia-persistenced
// is stopped around every (re)bind (a running persistenced wedges the bind); every GPU is in the run
// manifest before it is touched, so `gpuvet clean` can redo an incomplete restore.
//
// Everything runs through one seam: a Runner (a shell script in, its stdout out; the ssh backend's
// SSH session), with the sysfs, /dev and driverctl configuration roots in Paths, so tests drive the
// real driverctl against a fake /sys/bus/pci tree.
package vfio

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/fleet"
)

// Runner and Recorder are the fleet layer's seams: a shell script run on the host, and the run
// manifest an object is recorded in before it is made.
type (
	Runner   = fleet.ShellRunner
	Recorder = fleet.Recorder
)

// Manifest kinds.
const (
	// KindBinding is one GPU released from vfio-pci; Name: "ADDRESS driver=D override=persistent|runtime|none",
	// what the restore puts back.
	KindBinding = "vfio-binding"
	// KindPersistenced is nvidia-persistenced, active before the release and stopped by it: started
	// again after the restore.
	KindPersistenced = "vfio-persistenced"
)

// Kinds are the manifest kinds `gpuvet clean` hands to Clean.
var Kinds = []string{KindBinding, KindPersistenced}

// Paths are the node's roots (defaults: /sys, /dev, /etc/driverctl.d, /proc, and /var/lib/gpuvet
// for State, where the node keeps its own record of what each run released).
type Paths struct {
	Sys, Dev, Conf, Proc, State string
}

func (p Paths) orDefault() Paths {
	return Paths{Sys: cmp.Or(p.Sys, "/sys"), Dev: cmp.Or(p.Dev, "/dev"), Conf: cmp.Or(p.Conf, "/etc/driverctl.d"),
		Proc: cmp.Or(p.Proc, "/proc"), State: cmp.Or(p.State, "/var/lib/gpuvet")}
}

// VFIODriver is the passthrough driver; NvidiaDriver the one the run needs.
const (
	VFIODriver   = "vfio-pci"
	NvidiaDriver = "nvidia"
)

// GPU is one NVIDIA GPU as the node's sysfs shows it.
type GPU struct {
	Address   string // 0000:41:00.0
	Driver    string // the bound driver; "" when none
	Override  string // driver_override; "" when (null)
	Persisted string // driverctl's saved override (Conf/pci-ADDRESS); ""
	Group     string // IOMMU group
}

// Inspect lists the node's NVIDIA GPUs (vendor 0x10de, class display 0x03xxxx).
func Inspect(ctx context.Context, r Runner, p Paths) ([]GPU, error) {
	p = p.orDefault()
	out, err := r.Run(ctx, fmt.Sprintf(inspectScript, quote(p.Sys), quote(p.Conf)))
	if err != nil {
		return nil, fmt.Errorf("read the node's PCI devices: %w", err)
	}
	var gpus []GPU
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, "|")
		if len(f) != 5 {
			continue
		}
		g := GPU{Address: f[0], Driver: f[1], Override: strings.TrimSpace(f[2]), Persisted: strings.TrimSpace(f[3]), Group: f[4]}
		if g.Override == "(null)" {
			g.Override = ""
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// inspectScript prints ADDRESS|DRIVER|OVERRIDE|PERSISTED|GROUP per NVIDIA display device.
const inspectScript = `s=%s; c=%s
for d in "$s"/bus/pci/devices/*; do
  [ -e "$d/vendor" ] || continue
  [ "$(cat "$d/vendor")" = 0x10de ] || continue
  case "$(cat "$d/class")" in 0x03*) ;; *) continue;; esac
  a=$(basename "$d"); drv=""; [ -L "$d/driver" ] && drv=$(basename "$(readlink "$d/driver")")
  o=$(cat "$d/driver_override" 2>/dev/null); p=$(cat "$c/pci-$a" 2>/dev/null); g=""
  [ -L "$d/iommu_group" ] && g=$(basename "$(readlink "$d/iommu_group")")
  echo "$a|$drv|$o|$p|$g"
done`

// Release is one node's release of its vfio GPUs; Restore undoes it.
type Release struct {
	r     Runner
	p     Paths
	rec   Recorder
	runID string
	base  fleet.Object
	say   func(string)
	GPUs  []GPU // released, as they were
	objs  []fleet.Object
	Wait  time.Duration // how long a bind may take to show (default 10 s)
	Steps []string      // what was done, in order: for the summary and the report
}

// Begin releases every NVIDIA GPU of the node bound (or overridden) to vfio-pci: it refuses when a
// VM holds one (attached: the GPUs OpenNebula says a VM has; processes holding a /dev/vfio group
// are found too), records each GPU in the manifest and in the node's own record of run runID
// (Paths.State/vfio-RUN, before the first change: a restore puts back only what it names), stops
// nvidia-persistenced, lifts driverctl's override and unbinds vfio-pci. An error after the first
// change leaves the Release for Restore to undo.
func Begin(ctx context.Context, r Runner, p Paths, attached map[string]string, rec Recorder, base fleet.Object, runID string, say func(string)) (*Release, error) {
	p = p.orDefault()
	rl := &Release{r: r, p: p, rec: rec, base: base, runID: runID, say: say}
	if err := checkRunID(runID); err != nil {
		return rl, err
	}
	gpus, err := Inspect(ctx, r, p)
	if err != nil {
		return rl, err
	}
	for _, g := range gpus {
		if g.Driver == VFIODriver || g.Override == VFIODriver || g.Persisted == VFIODriver {
			rl.GPUs = append(rl.GPUs, g)
		}
	}
	if len(rl.GPUs) == 0 {
		return rl, nil
	}
	var busy []string
	for _, g := range rl.GPUs {
		if vm := attached[g.Address]; vm != "" {
			busy = append(busy, g.Address+" is attached to "+vm)
		}
		if g.Group == "" {
			continue
		}
		holders, err := r.Run(ctx, fmt.Sprintf(holderScript, quote(p.Dev+"/vfio/"+g.Group)))
		if err != nil {
			// Unknown is not free: a GPU that may be a VM's is never taken from it.
			busy = append(busy, fmt.Sprintf("%s (IOMMU group %s): whether a VM holds it cannot be told (%v)", g.Address, g.Group, err))
		} else if h := strings.TrimSpace(holders); h != "" {
			busy = append(busy, fmt.Sprintf("%s (IOMMU group %s) is held by %s", g.Address, g.Group, strings.ReplaceAll(h, "\n", ", ")))
		}
	}
	if len(busy) > 0 {
		return rl, fmt.Errorf("refusing to release the node's GPUs from vfio-pci: %s: terminate those VMs first (nothing changed on the node)", strings.Join(busy, "; "))
	}
	// The manifest first: every GPU with what restores it, and persistenced if it runs.
	for _, g := range rl.GPUs {
		if err := rl.record(KindBinding, bindingName(g)); err != nil {
			return rl, err
		}
	}
	if rl.persistenced(ctx) {
		if err := rl.record(KindPersistenced, "nvidia-persistenced"); err != nil {
			return rl, err
		}
	}
	// The node's own record, before anything changes there: a manifest is a file anyone may edit.
	rf := hostRecord(p, runID)
	lines := fleet.ShellWords(fleet.RecordLines(rl.objs))
	if _, err := r.Run(ctx, fmt.Sprintf("mkdir -p %s && umask 077 && printf '%%s\n' %s > %s", quote(p.State), lines, quote(rf))); err != nil {
		return rl, fmt.Errorf("write the node's record %s: %w (nothing released)", rf, err)
	}
	if _, err := rl.stopPersistenced(ctx); err != nil {
		return rl, err
	}
	for _, g := range rl.GPUs {
		dev := p.Sys + "/bus/pci/devices/" + g.Address
		// --noprobe: the GPU stays unbound until the driver is there; gpuvet probes and checks itself.
		if g.Override != "" || g.Persisted != "" {
			if _, err := r.Run(ctx, "driverctl --noprobe unset-override "+quote(g.Address)); err != nil {
				return rl, fmt.Errorf("driverctl unset-override %s: %w", g.Address, err)
			}
		}
		// The write may find the driver gone between the test and the write (driverctl's own
		// unbind landing): not an error; waitDriver below checks what counts, the GPU unbound.
		if _, err := r.Run(ctx, fmt.Sprintf(`d=%s; a=%s; if [ -L "$d/driver" ] && [ "$(basename "$(readlink "$d/driver")")" = vfio-pci ]; then echo "$a" 2>/dev/null > "$d/driver/unbind" || true; fi`, quote(dev), quote(g.Address))); err != nil {
			return rl, fmt.Errorf("unbind %s from vfio-pci: %w", g.Address, err)
		}
		if err := rl.waitDriver(ctx, g.Address, ""); err != nil {
			return rl, err
		}
		rl.step("released " + g.Address + " from vfio-pci (override lifted)")
	}
	return rl, nil
}

// Bind binds the released GPUs to the nvidia driver (loaded first), persistenced stopped around it.
func (rl *Release) Bind(ctx context.Context) error {
	if len(rl.GPUs) == 0 {
		return nil
	}
	if _, err := rl.stopPersistenced(ctx); err != nil {
		return err
	}
	if _, err := rl.r.Run(ctx, "modprobe nvidia"); err != nil {
		return fmt.Errorf("modprobe nvidia: %w (is the driver installed for the running kernel?)", err)
	}
	for _, g := range rl.GPUs {
		if _, err := rl.r.Run(ctx, fmt.Sprintf("echo %s > %s", quote(g.Address), quote(rl.p.Sys+"/bus/pci/drivers_probe"))); err != nil {
			return fmt.Errorf("probe %s: %w", g.Address, err)
		}
		if err := rl.waitDriver(ctx, g.Address, NvidiaDriver); err != nil {
			return err
		}
		rl.step("bound " + g.Address + " to nvidia")
	}
	return nil
}

// Restore puts every released GPU back on vfio-pci with its override as it was (persistent,
// runtime only, or none), persistenced stopped around it and started again if it ran before, and
// verifies each; a GPU left off vfio-pci is an error naming it. r is the connection to use (nil:
// Begin's). Safe to call twice.
func (rl *Release) Restore(ctx context.Context, r Runner) error {
	if r != nil {
		rl.r = r
	}
	done, err := restore(ctx, rl.r, rl.p, rl.runID, rl.objs, rl.Wait, rl.step)
	rl.objs = fleet.MarkDone(rl.rec, rl.objs, done)
	return err
}

// Clean redoes the restore of a killed run runID from its manifest objects (all on one node).
func Clean(ctx context.Context, r Runner, p Paths, runID string, objs []fleet.Object, say func(string)) ([]fleet.Object, error) {
	if err := checkRunID(runID); err != nil {
		return nil, err
	}
	return restore(ctx, r, p.orDefault(), runID, objs, 0, say)
}

// restore puts back what objs and the node's own record of run runID both name, and only what is
// still as gpuvet left it (unbound, on nvidia with no process holding it, or already back), each
// checked before anything changes. nvidia-persistenced is stopped only to rebind a GPU, and started
// again on every path when this restore stopped it or it ran before the release. The record goes
// when everything it names is back.
func restore(ctx context.Context, r Runner, p Paths, runID string, objs []fleet.Object, wait time.Duration, say func(string)) ([]fleet.Object, error) {
	rl := &Release{r: r, p: p, Wait: wait, say: say}
	if len(objs) == 0 {
		return nil, nil
	}
	record, present, err := readRecord(ctx, r, p, runID)
	if err != nil {
		return nil, fmt.Errorf("INCOMPLETE vfio restore: %w: nothing changed; `gpuvet clean` retries", err)
	}
	if !present { // written before the first change: without it, nothing was released
		say(fmt.Sprintf("no vfio record of run %s on the node (%s): it released nothing, nothing to restore", runID, hostRecord(p, runID)))
		return objs, nil
	}
	var done, persist []fleet.Object
	var bad []string
	type todo struct {
		o fleet.Object
		g GPU
	}
	var work []todo
	now, err := Inspect(ctx, r, p)
	if err != nil {
		return nil, fmt.Errorf("INCOMPLETE vfio restore: %w: nothing changed; `gpuvet clean` retries", err)
	}
	for _, o := range objs {
		if !slices.Contains(record, o.RecordLine()) {
			bad = append(bad, fmt.Sprintf("%s %s is not in the node's record of run %s (%s): not gpuvet's, left alone", o.Kind, fleet.Quote(o.Name), runID, hostRecord(p, runID)))
			continue
		}
		switch o.Kind {
		case KindPersistenced:
			persist = append(persist, o)
			continue
		case KindBinding:
		default:
			continue
		}
		g, err := parseBinding(o.Name)
		if err == nil {
			var back bool
			back, err = rl.asLeft(ctx, now, g)
			if err == nil && back {
				say("restored " + g.Address + " to vfio-pci (" + overrideKind(g) + " override): already back")
				done = append(done, o)
				continue
			}
		}
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		work = append(work, todo{o, g})
	}
	var stopped bool
	if len(work) > 0 {
		if stopped, err = rl.stopPersistenced(ctx); err != nil {
			return done, fmt.Errorf("INCOMPLETE vfio restore: %w: no GPU was put back on vfio-pci; `gpuvet clean` retries", err)
		}
	}
	for _, w := range work {
		if err := rl.restoreOne(ctx, w.g); err != nil {
			bad = append(bad, err.Error())
			continue
		}
		say("restored " + w.g.Address + " to vfio-pci (" + overrideKind(w.g) + " override)")
		done = append(done, w.o)
	}
	// Started again on every path: what gpuvet stopped (now or at the release) runs again.
	var startErr error
	if stopped || len(persist) > 0 {
		if _, err := r.Run(ctx, "systemctl start nvidia-persistenced"); err != nil {
			startErr = fmt.Errorf("nvidia-persistenced was stopped by gpuvet and did not start again: %w", err)
		} else {
			say("started nvidia-persistenced again")
			done = append(done, persist...)
		}
	}
	if len(bad) > 0 {
		err := fmt.Errorf("INCOMPLETE vfio restore: %s: the node cannot pass these GPUs to VMs until they are back on vfio-pci; `gpuvet clean` retries from the run manifest", strings.Join(bad, "; "))
		return done, errors.Join(err, startErr)
	}
	if startErr != nil {
		return done, startErr
	}
	if len(done) == len(objs) {
		_, _ = r.Run(ctx, fmt.Sprintf("rm -f %s; rmdir %s 2>/dev/null; :", quote(hostRecord(p, runID)), quote(p.State)))
	}
	return done, nil
}

// asLeft says whether GPU g is still as gpuvet left it: back on vfio-pci with its override (back),
// unbound, or on nvidia with nothing holding it. Anything else (another driver, a process serving,
// no NVIDIA GPU of the node) is an error naming it, and the GPU is not touched.
func (rl *Release) asLeft(ctx context.Context, now []GPU, g GPU) (back bool, err error) {
	n, err := gpuAt(now, g.Address)
	if err != nil {
		return false, err
	}
	switch n.Driver {
	case VFIODriver:
		if n.Override == g.Override && n.Persisted == g.Persisted {
			return true, nil
		}
		return false, fmt.Errorf("%s is on vfio-pci with override %q (persisted %q), not as gpuvet left it: left alone", g.Address, n.Override, n.Persisted)
	case "":
		return false, nil
	case NvidiaDriver:
		holders, err := rl.r.Run(ctx, fmt.Sprintf(servingScript, quote(rl.p.Proc+"/driver/nvidia/gpus/"+g.Address+"/information"), quote(rl.p.Dev)))
		if err != nil {
			return false, fmt.Errorf("%s is on nvidia and whether it serves cannot be told (%w): not taken", g.Address, err)
		}
		if h := strings.TrimSpace(holders); h != "" {
			return false, fmt.Errorf("%s is on nvidia and serving (%s): not taken from it; stop that first", g.Address, strings.ReplaceAll(h, "\n", ", "))
		}
		return false, nil
	}
	return false, fmt.Errorf("%s is bound to %s, not as gpuvet left it: left alone", g.Address, n.Driver)
}

// servingScript names the processes holding the GPU's /dev/nvidiaN open (N from the driver's
// information file; unreadable, any /dev/nvidiaN counts: a GPU that may serve is never taken).
const servingScript = `m=$(sed -n 's/^Device Minor:[[:space:]]*\([0-9][0-9]*\).*/\1/p' %s 2>/dev/null); d=%s
for f in /proc/[0-9]*/fd/*; do
  l=$(readlink "$f" 2>/dev/null) || continue
  case "$l" in "$d"/nvidia[0-9]*) ;; *) continue;; esac
  [ -z "$m" ] || [ "$l" = "$d/nvidia$m" ] || continue
  p=${f#/proc/}; p=${p%%%%/*}
  echo "pid $p ($(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-120))"
done | sort -u`

// hostRecord is the node's own record of what run runID released.
func hostRecord(p Paths, runID string) string { return p.State + "/vfio-" + runID }

// readRecord reads the node's record of run runID (a regular file, not a link; its first 64 KiB):
// its lines, and whether it is there.
func readRecord(ctx context.Context, r Runner, p Paths, runID string) ([]string, bool, error) {
	out, err := r.Run(ctx, fmt.Sprintf(`f=%s; if [ -f "$f" ] && [ ! -L "$f" ]; then echo present; head -c 65536 "$f"; fi`, quote(hostRecord(p, runID))))
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", hostRecord(p, runID), err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "present" {
		return nil, false, nil
	}
	return lines[1:], true, nil
}

// checkRunID refuses a run id that is not one gpuvet makes (it names a file on the node).
func checkRunID(id string) error {
	if id == "" || len(id) > 64 || strings.Trim(id, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_") != "" {
		return fmt.Errorf("vfio release: run id %s is not one gpuvet makes", fleet.Quote(id))
	}
	return nil
}

// restoreOne binds one GPU back to vfio-pci and checks the binding and its override.
func (rl *Release) restoreOne(ctx context.Context, g GPU) error {
	// A manifest may be edited: only an NVIDIA GPU of the node is ever put on vfio-pci.
	gpus, err := Inspect(ctx, rl.r, rl.p)
	if err == nil {
		_, err = gpuAt(gpus, g.Address)
	}
	if err != nil {
		return err
	}
	a := quote(g.Address)
	var cmd string
	switch overrideKind(g) {
	case "persistent":
		cmd = "driverctl --noprobe set-override " + a + " vfio-pci"
	case "runtime":
		cmd = "driverctl --noprobe --nosave set-override " + a + " vfio-pci"
	default: // bound to vfio-pci without an override: unbind what holds it, bind vfio-pci directly
		dev := quote(rl.p.Sys + "/bus/pci/devices/" + g.Address)
		cmd = fmt.Sprintf(`d=%s; [ -L "$d/driver" ] && echo %s > "$d/driver/unbind"; :`, dev, a)
	}
	if _, err := rl.r.Run(ctx, cmd); err != nil {
		return fmt.Errorf("%s: %s: %w", g.Address, cmd, err)
	}
	target := rl.p.Sys + "/bus/pci/drivers_probe"
	if overrideKind(g) == "none" {
		target = rl.p.Sys + "/bus/pci/drivers/vfio-pci/bind"
	}
	if err := rl.waitDriver(ctx, g.Address, ""); err != nil {
		return err
	}
	if _, err := rl.r.Run(ctx, fmt.Sprintf("echo %s > %s", a, quote(target))); err != nil {
		return fmt.Errorf("%s: bind vfio-pci: %w", g.Address, err)
	}
	if err := rl.waitDriver(ctx, g.Address, VFIODriver); err != nil {
		return err
	}
	now, err := Inspect(ctx, rl.r, rl.p)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(now, func(n GPU) bool { return n.Address == g.Address })
	switch {
	case i < 0:
		return fmt.Errorf("%s: gone from the node's PCI devices", g.Address)
	case now[i].Override != g.Override || now[i].Persisted != g.Persisted:
		return fmt.Errorf("%s: back on vfio-pci but its override is %q (persisted %q), was %q (persisted %q)",
			g.Address, now[i].Override, now[i].Persisted, g.Override, g.Persisted)
	}
	return nil
}

// gpuAt is the node's GPU at addr; a manifest may be edited: any other address is refused.
func gpuAt(gpus []GPU, addr string) (GPU, error) {
	if i := slices.IndexFunc(gpus, func(n GPU) bool { return n.Address == addr }); i >= 0 {
		return gpus[i], nil
	}
	return GPU{}, fmt.Errorf("%s is not an NVIDIA GPU of the node: not gpuvet's to bind, left alone", addr)
}

// waitDriver waits until the GPU's bound driver is want ("" = none).
func (rl *Release) waitDriver(ctx context.Context, addr, want string) error {
	limit := fleet.OrDefault(rl.Wait, 10*time.Second)
	deadline := time.Now().Add(limit)
	script := fmt.Sprintf(`d=%s; [ -L "$d/driver" ] && basename "$(readlink "$d/driver")"; :`, quote(rl.p.Sys+"/bus/pci/devices/"+addr))
	got := ""
	for {
		out, err := rl.r.Run(ctx, script)
		got = strings.TrimSpace(out)
		if err == nil && got == want {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if want == "" {
		return fmt.Errorf("%s: still bound to %s after %s", addr, got, limit)
	}
	return fmt.Errorf("%s: bound to %q, not %s, after %s (a running nvidia-persistenced or a VM can wedge a bind)", addr, got, want, limit)
}

// persistenced says whether nvidia-persistenced is active.
func (rl *Release) persistenced(ctx context.Context) bool {
	out, _ := rl.r.Run(ctx, "systemctl is-active nvidia-persistenced 2>/dev/null; :")
	return strings.TrimSpace(out) == "active"
}

// stopPersistenced stops nvidia-persistenced when it runs (a running one wedges a (re)bind) and
// says whether it did.
func (rl *Release) stopPersistenced(ctx context.Context) (bool, error) {
	if !rl.persistenced(ctx) {
		return false, nil
	}
	if _, err := rl.r.Run(ctx, "systemctl stop nvidia-persistenced"); err != nil {
		return false, fmt.Errorf("systemctl stop nvidia-persistenced: %w (a running persistenced wedges the vfio bind)", err)
	}
	rl.step("stopped nvidia-persistenced")
	return true, nil
}

func (rl *Release) record(kind, name string) error {
	return fleet.RecordOn(rl.rec, &rl.objs, rl.base, kind, name, "nothing released")
}

func (rl *Release) step(s string) {
	rl.Steps = append(rl.Steps, s)
	if rl.say != nil {
		rl.say(s)
	}
}

// overrideKind is how the GPU's vfio-pci override was kept: persistent (driverctl's saved one),
// runtime (driver_override only) or none (bound without one).
func overrideKind(g GPU) string {
	switch {
	case g.Persisted == VFIODriver:
		return "persistent"
	case g.Override == VFIODriver:
		return "runtime"
	}
	return "none"
}

func bindingName(g GPU) string {
	return g.Address + " driver=" + VFIODriver + " override=" + overrideKind(g)
}

// parseBinding reads a KindBinding name back (a manifest may be edited: the address is checked).
func parseBinding(name string) (GPU, error) {
	f := strings.Fields(name)
	if len(f) != 3 || !pciAddr(f[0]) || f[1] != "driver="+VFIODriver || !strings.HasPrefix(f[2], "override=") {
		return GPU{}, fmt.Errorf("manifest object %q: not a vfio binding gpuvet records (want ADDRESS driver=vfio-pci override=persistent|runtime|none)", name)
	}
	g := GPU{Address: f[0], Driver: VFIODriver}
	switch strings.TrimPrefix(f[2], "override=") {
	case "persistent":
		g.Override, g.Persisted = VFIODriver, VFIODriver
	case "runtime":
		g.Override = VFIODriver
	case "none":
	default:
		return GPU{}, fmt.Errorf("manifest object %q: unknown override kind", name)
	}
	return g, nil
}

// pciAddr is a PCI address DDDD:BB:DD.F.
func pciAddr(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i, c := range s {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// holderScript names the processes holding a /dev/vfio group open (a VM's qemu). One find walks
// every descriptor: a readlink each forks thousands of times on a busy host (tens of seconds), long
// enough for a holder to come and go unseen.
const holderScript = `g=%s
find /proc/[0-9]*/fd -maxdepth 1 -lname "$g" 2>/dev/null | while read -r f; do
  p=${f#/proc/}; p=${p%%%%/*}
  echo "pid $p ($(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-120))"
done | sort -u`

var quote = fleet.ShellQuote
