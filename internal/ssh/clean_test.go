package ssh

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Finding 6 of issue 43: what a manifest names is checked before any connection: a local_out
// outside the run's own --out (/etc, a sibling, a link) or a folder that is not the run's is
// refused, and no TCP connection is even opened.
func TestCleanChecksNamesBeforeConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	host := "root@127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	out := filepath.Join(t.TempDir(), "out")
	os.MkdirAll(out, 0o755)
	elsewhere := t.TempDir()
	os.Symlink(elsewhere, filepath.Join(out, "hosts"))
	opts := Options{ConfigFile: "/dev/null", KnownHosts: []string{filepath.Join(t.TempDir(), "kh")}, AgentSocket: "/nonexistent"}
	for _, c := range []struct {
		name, local, out, want string
	}{
		{"/tmp/gpuvet-r1-h", "/etc", out, "not a folder"},
		{"/tmp/gpuvet-r1-h", filepath.Join(out, "hosts", "h"), out, "symbolic link"},
		{"/tmp/gpuvet-r1-h", filepath.Join(out, "hosts", "..", "..", "x"), out, "not a folder"},
		{"/tmp/gpuvet-r1-h", filepath.Join(out, "hosts", "h"), "", "no absolute --out"},
		{"/etc", "", out, "not a gpuvet run folder"},
	} {
		err := Clean(context.Background(), fleet.Object{Kind: ObjectKind, Name: c.name, Host: host, LocalOut: c.local}, "r1", c.out, opts, func(string) {})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s (out %s): %v, want %q", c.name, c.local, c.out, err, c.want)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connection(s) opened for names that are refused", n)
	}
}

// Finding 6: a host only a manifest names, whose key is not known, gets no advice to key-scan it
// (nor is it trusted on first use, whatever ssh.accept_new says); partial results go into the
// run's own --out only (its summary.json names the run), elsewhere they are not collected.
func TestCleanUnknownManifestHostGetsNoKeyscanAdvice(t *testing.T) {
	f := newFixture(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(empty, nil, 0o600)
	f.opts.ConfigFile = "/dev/null"
	opts := f.opts
	opts.KnownHosts, opts.AcceptNew = []string{empty}, true
	o := fleet.Object{Kind: ObjectKind, Name: filepath.Join(f.srv.Dir, "gpuvet-r1-h"), Host: Address(f.target), Identity: f.target.IdentityFiles[0]}
	err := Clean(context.Background(), o, "r1", "", opts, func(string) {})
	if err == nil || strings.Contains(err.Error(), "ssh-keyscan") || !strings.Contains(err.Error(), "only a run manifest names it") {
		t.Fatalf("an unknown host a manifest names: %v", err)
	}
	if b, _ := os.ReadFile(empty); len(b) != 0 {
		t.Fatalf("a manifest's host was trusted on first use: %s", b)
	}
	// Known host; the run folder with out/ and the marker; --out without the run's summary: the
	// folder goes, nothing is written locally.
	j := f.job(nil)
	j.RunID, j.RemoteDir = "r1", o.Name
	os.MkdirAll(filepath.Join(o.Name, "out"), 0o755)
	os.WriteFile(filepath.Join(o.Name, ".gpuvet-run"), []byte("r1"), 0o644)
	os.WriteFile(filepath.Join(o.Name, "out", "summary.json"), []byte(`{"run_id":"x"}`), 0o644)
	out := filepath.Join(t.TempDir(), "out")
	o.LocalOut = filepath.Join(out, "hosts", "h")
	var said []string
	if err := Clean(context.Background(), o, "r1", out, f.opts, func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(o.LocalOut); err == nil || !strings.Contains(strings.Join(said, "\n"), "not the run's own --out") {
		t.Errorf("collected into an --out that is not the run's: %v", said)
	}
	if _, err := os.Stat(o.Name); err == nil {
		t.Error("the run folder is still there")
	}
	// The run's own --out: collected.
	os.MkdirAll(filepath.Join(o.Name, "out"), 0o755)
	os.WriteFile(filepath.Join(o.Name, ".gpuvet-run"), []byte("r1"), 0o644)
	os.WriteFile(filepath.Join(o.Name, "out", "summary.json"), []byte(`{"run_id":"x"}`), 0o644)
	if err := results.WriteJSON(filepath.Join(out, "summary.json"), &results.Summary{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	said = nil
	if err := Clean(context.Background(), o, "r1", out, f.opts, func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(o.LocalOut, "summary.json")); err != nil {
		t.Errorf("not collected into the run's own --out: %v %q", err, said)
	}
}

// What a host answers is bounded: a script that prints 20 MB is an error, not 20 MB held.
func TestOutputBounded(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	if _, err := output(context.Background(), c, "head -c 20000000 /dev/zero"); err == nil || !strings.Contains(err.Error(), "over 16 MiB") {
		t.Fatalf("20 MB of output: %v", err)
	}
	_, err := output(context.Background(), c, "head -c 3000000 /dev/zero | tr '\\0' x >&2; exit 1")
	if err == nil || len(err.Error()) > 2200 {
		t.Fatalf("3 MB of error text: %d bytes", len(fmt.Sprint(err)))
	}
}
