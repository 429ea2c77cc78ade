// Package hostpreptest makes real Debian hosts for host-preparation tests: a copy-on-write overlay
// of a debootstrap'd bookworm root (scripts/hostprep-root.sh builds it once, cached under
// $HOME/.cache/gpuvet-hostprep), with its own dpkg, apt and package lists, a local apt repository of
// stand-in NVIDIA packages (real names and versions, built with equivs-build) as its only source,
// and its own OpenSSH server chrooted into it on a loopback address. It needs root (mounts, chroot,
// sshd) and the built root; without them the test skips and says what is missing.
package hostpreptest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/ssh/sshdtest"
)

// Host is one Debian host.
type Host struct {
	Root string // the host's / as seen from here
	SSHD *sshdtest.SSHD

	binds map[string]string
}

// Options shape a host.
type Options struct {
	Authorized string   // authorized_keys line of the test's key
	SetEnv     []string // sshd's SetEnv (e.g. GPUVET_TEST_AS_GPUVET=1)
	// Binds mounts folders of this machine into the host: path in the host -> folder here (a fake
	// /sys tree, a driverctl configuration folder). Unmounted before the host goes.
	Binds map[string]string
}

// RepoDir is where the stand-in repository sits inside each host.
const RepoDir = "/srv/gpuvet-standin"

// New makes a host on addr (127.0.0.x), torn down at the test's end.
func New(t *testing.T, addr string, o Options) *Host {
	t.Helper()
	if testing.Short() {
		t.Skip("a chroot host with its own sshd: end to end, go test without -short runs it")
	}
	if os.Geteuid() != 0 {
		t.Skip("host-preparation chroot tests skipped: they need root (overlay mounts, chroot, sshd)")
	}
	if _, err := sshdtest.Binary(); err != nil {
		t.Skipf("host-preparation chroot tests skipped: %v", err)
	}
	base := script(t, "build")
	repo := script(t, "repo")
	dir, err := os.MkdirTemp("", "gpuvet-host-"+addr+"-")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := &Host{Root: root, binds: o.Binds}
	t.Cleanup(func() { h.teardown(t, dir) })
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", base, filepath.Join(dir, "upper"), filepath.Join(dir, "work"))
	if err := syscall.Mount("overlay", root, "overlay", 0, opts); err != nil {
		t.Skipf("host-preparation chroot tests skipped: overlay mount: %v", err)
	}
	if err := syscall.Mount("proc", filepath.Join(root, "proc"), "proc", 0, ""); err != nil {
		t.Skipf("host-preparation chroot tests skipped: proc mount: %v", err)
	}
	for in, here := range o.Binds {
		p := filepath.Join(root, in)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount(here, p, "", syscall.MS_BIND, ""); err != nil {
			t.Fatalf("bind %s on the host's %s: %v", here, in, err)
		}
	}
	if out, err := exec.Command("cp", "-r", repo, filepath.Join(root, RepoDir)).CombinedOutput(); err != nil {
		t.Fatalf("copy the repository: %v %s", err, out)
	}
	// The stand-in repository is the host's only source: nothing reaches a mirror.
	list := "deb [trusted=yes] file:" + RepoDir + " ./\n"
	if err := os.WriteFile(filepath.Join(root, "etc/apt/sources.list.d/gpuvet-standin.list"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Exec(t, "apt-get update -q")
	h.SSHD = sshdtest.Start(t, addr, sshdtest.Options{Authorized: o.Authorized, SetEnv: o.SetEnv, Root: root})
	return h
}

// script runs scripts/hostprep-root.sh (cached after its first run) and returns the path it prints.
func script(t *testing.T, what string) string {
	t.Helper()
	s := filepath.Join(moduleRoot(t), "scripts", "hostprep-root.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", s, what)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("host-preparation chroot tests skipped: %s %s: %v: %s", s, what, err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

func moduleRoot(t *testing.T) string {
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		p := filepath.Dir(d)
		if p == d {
			t.Fatal("no go.mod above the test's folder")
		}
		d = p
	}
}

// Exec runs a shell script inside the host (chroot) and returns its output; it fails the test
// when the script fails.
func (h *Host) Exec(t *testing.T, sh string) string {
	t.Helper()
	out, err := h.Try(sh)
	if err != nil {
		t.Fatalf("in the host: %s: %v\n%s", sh, err, out)
	}
	return out
}

// Try runs a shell script inside the host and returns its output and error.
func (h *Host) Try(sh string) (string, error) {
	args := []string{"chroot", h.Root, "/bin/sh", "-c", "export DEBIAN_FRONTEND=noninteractive LC_ALL=C PATH=/usr/sbin:/usr/bin:/sbin:/bin; " + sh}
	// Inside the PID and mount namespace of the host's sshd, where it has one: what the test starts
	// there is what a run over SSH sees, and nothing of another test's host.
	if h.SSHD != nil && h.SSHD.NamespacePid() > 0 {
		args = append([]string{"nsenter", "-t", strconv.Itoa(h.SSHD.NamespacePid()), "-p", "-m"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Installed lists the host's installed packages (dpkg status ii), name=version.
func (h *Host) Installed(t *testing.T) map[string]string {
	t.Helper()
	out := h.Exec(t, `dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\n'`)
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "ii" {
			m[f[1]] = f[2]
		}
	}
	return m
}

// Procs lists the pids of the processes running inside the host whose name is comm. A child of
// one of them by the same name is left out: a shell script forks itself, under its own name, for
// every command it runs (the stand-in engine's `sleep 1`), and that fork is not a second process.
func (h *Host) Procs(comm string) []int {
	match := map[int]bool{}
	for _, pid := range h.pids() {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == comm {
			match[pid] = true
		}
	}
	var out []int
	for pid := range match {
		if !match[parent(pid)] {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// parent is a process's parent pid (0 when it cannot be read): /proc/PID/stat's fourth field,
// after the name in parentheses (which may hold spaces).
func parent(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// pids are the processes whose root is the host's.
func (h *Host) pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if r, err := os.Readlink(fmt.Sprintf("/proc/%d/root", pid)); err == nil && r == h.Root {
			out = append(out, pid)
		}
	}
	return out
}

// teardown stops everything running in the host, unmounts it and removes its folder only once
// nothing is mounted under it.
func (h *Host) teardown(t *testing.T, dir string) {
	if h.SSHD != nil {
		h.SSHD.Stop()
	}
	for i := 0; i < 20; i++ {
		ps := h.pids()
		if len(ps) == 0 {
			break
		}
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for in := range h.binds {
		_ = syscall.Unmount(filepath.Join(h.Root, in), syscall.MNT_DETACH)
	}
	_ = syscall.Unmount(filepath.Join(h.Root, "proc"), syscall.MNT_DETACH)
	_ = syscall.Unmount(h.Root, syscall.MNT_DETACH)
	if mounts, err := os.ReadFile("/proc/self/mounts"); err != nil || bytes.Contains(mounts, []byte(" "+dir+"/")) {
		t.Errorf("host %s is still mounted: left in place", dir)
		return
	}
	_ = os.RemoveAll(dir)
}
