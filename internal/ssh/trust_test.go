package ssh

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/fleet"
)

// Issue 30: host names that differ only in characters a file name cannot hold get folders of
// their own.
func TestSafeNamesNeverCollide(t *testing.T) {
	seen := map[string]string{}
	for _, n := range []string{"gpu:1", "gpu_1", "gpu/1", "gpu 1", "..", "a"} {
		s := fleet.Safe(n)
		if other, dup := seen[s]; dup {
			t.Fatalf("%q and %q share folder %q", n, other, s)
		}
		if strings.ContainsAny(s, "/: ") || s == ".." {
			t.Fatalf("%q -> %q is not a file name", n, s)
		}
		seen[s] = n
	}
	if fleet.Safe("node-1.example") != "node-1.example" {
		t.Fatal("a plain name changed")
	}
}

// A run folder that already exists (mkdir fails) is never removed, and a folder without the run's
// marker is refused by Remove: gpuvet deletes only what it made.
func TestFailedMkdirNeverRemoves(t *testing.T) {
	f := newFixture(t)
	j := f.job(nil)
	if err := os.MkdirAll(j.RemoteDir, 0o755); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(j.RemoteDir, "precious")
	os.WriteFile(precious, []byte("x"), 0o644)
	h := &Host{Target: f.target, Options: f.opts, Job: j}
	if err := h.Provision(context.Background()); err == nil || !strings.Contains(err.Error(), "mkdir") {
		t.Fatalf("provision into an existing folder: %v", err)
	}
	if err := h.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Fatal("cleanup removed a folder the run did not make")
	}
	if err := Remove(context.Background(), f.dial(t), j.RemoteDir, j.RunID); err == nil || !strings.Contains(err.Error(), "not gpuvet's") {
		t.Fatalf("Remove of a folder without the marker: %v", err)
	}
	for _, dir := range []string{"/etc/x", "/home/ops", j.RemoteDir + "/../x", "relative/gpuvet-run1-h"} {
		if err := Remove(context.Background(), f.dial(t), dir, j.RunID); err == nil || !strings.Contains(err.Error(), "not a gpuvet run folder") {
			t.Fatalf("Remove(%q): %v", dir, err)
		}
	}
	if _, err := os.Stat(precious); err != nil {
		t.Fatal("a refused Remove deleted something")
	}
}

// The key gpuvet puts in VMs: ~ expanded, and OpenSSH's default key file when nothing names one
// and no agent holds a key.
func TestPublicKeyDefaultsAndTilde(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("SSH_AUTH_SOCK", "")
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	if _, err := PublicKey("", ""); err == nil {
		t.Fatal("no key anywhere: want an error")
	}
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519.pub"), []byte("ssh-ed25519 AAAAdefault me\n"), 0o644)
	if k, err := PublicKey("", ""); err != nil || k != "ssh-ed25519 AAAAdefault me" {
		t.Fatalf("default key: %q %v", k, err)
	}
	os.WriteFile(filepath.Join(home, "k.pub"), []byte("ssh-ed25519 AAAAtilde me\n"), 0o644)
	if k, err := PublicKey("~/k", ""); err != nil || k != "ssh-ed25519 AAAAtilde me" {
		t.Fatalf("~/k: %q %v", k, err)
	}
	if got := IdentityFiles("~/k"); len(got) != 1 || got[0] != filepath.Join(home, "k") {
		t.Fatalf("IdentityFiles(~/k) = %v", got)
	}
}

// No $USER (cron, systemd, containers): the account gpuvet runs as, as ssh does.
func TestResolveWithoutUSER(t *testing.T) {
	t.Setenv("USER", "")
	got, err := Resolve(Target{Name: "h"}, Options{ConfigFile: "/dev/null"})
	if err != nil || got.User == "" {
		t.Fatalf("user %q, %v", got.User, err)
	}
}

// A host trusted on first use (a new VM) has exactly its own key written to the run's
// known_hosts, and a second connection is accepted by it.
func TestAcceptNewWritesOnlyTheHostKey(t *testing.T) {
	f := newFixture(t)
	kh := filepath.Join(t.TempDir(), "vm_known_hosts")
	f.opts.KnownHosts, f.opts.AcceptNew = []string{kh}, true
	for range 2 {
		c, err := Dial(context.Background(), f.target, f.opts)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	b, _ := os.ReadFile(kh)
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 1 || lines[0] != f.srv.KnownHostsLine(nil) {
		t.Fatalf("known_hosts:\n%s\nwant only:\n%s", b, f.srv.KnownHostsLine(nil))
	}
}
