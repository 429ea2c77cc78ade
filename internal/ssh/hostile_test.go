package ssh

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/ssh/sshtest"
)

// A remote run that prints a line longer than the progress scanner holds (binary garbage, a log
// with no newline) must not stop the stream being read: the host would block on its next write and
// the run would hang until interrupted.
func TestRunSurvivesAHugeLine(t *testing.T) {
	f := newFixture(t)
	// 8 MiB with no newline: more than the channel's window, so an unread stream blocks the host.
	huge := "#!/bin/sh\nhead -c 8000000 /dev/zero | tr '\\0' x\necho\n" + strings.TrimPrefix(sshtest.FakeGpuvet, "#!/bin/sh\n")
	if err := os.WriteFile(f.bin, []byte(huge), 0o755); err != nil {
		t.Fatal(err)
	}
	c := f.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last string
	out, _, err := runJob(ctx, c, f.job(func(l string) { last = l }))
	if err != nil || out.Summary == nil || out.ExitCode != 0 {
		t.Fatalf("a run that printed an 8 MB line: %v (exit %d)", err, out.ExitCode)
	}
	if last != "done: status ok" {
		t.Errorf("progress after the long line lost: last line %.80q", last)
	}
	if len(out.Tail) > 4*64<<10 {
		t.Errorf("tail holds %d bytes", len(out.Tail))
	}
}

// Collecting the results is bounded by its context: a host whose tar hangs must not hang the run.
func TestCollectBoundedByContext(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "tar"), []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "PATH="+bin+":"+os.Getenv("PATH"))
	c := f.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- collect(ctx, c, f.srv.Dir, t.TempDir()) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a hung tar collected nothing but returned no error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("collect ignored its context: still waiting on the host's tar")
	}
}

// A failing script's error carries the END of its error text (apt's "E: …" comes last), however
// long it is, and holds no more of it than that.
func TestOutputErrorKeepsTheLastWords(t *testing.T) {
	f := newFixture(t)
	c := f.dial(t)
	_, err := output(context.Background(), c, "head -c 200000 /dev/zero | tr '\\0' x >&2; echo 'E: the real reason' >&2; exit 1")
	if err == nil || !strings.Contains(err.Error(), "E: the real reason") || len(err.Error()) > 2200 {
		t.Fatalf("error of a script with 200 KB of error text: %.200q… (%d bytes)", fmt.Sprint(err), len(fmt.Sprint(err)))
	}
	// put's and collect's error text is bounded too.
	err = put(context.Background(), c, strings.NewReader(""), "/nonexistent/dir/x", 0o600)
	if err == nil || len(err.Error()) > 4200 {
		t.Fatalf("put into a missing folder: %v", err)
	}
}

// `gpuvet clean` has no deadline of its own: removing a run folder from a host whose commands hang
// (rm on a dead NFS mount) is bounded, an error naming the folder, not a clean that never ends.
func TestCleanRemoverBounded(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "rm"), []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "PATH="+bin+":"+os.Getenv("PATH"))
	dir := filepath.Join(f.srv.Dir, "gpuvet-run1-h1")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, Marker), []byte("run1"), 0o600); err != nil {
		t.Fatal(err)
	}
	plan, err := config.Load(config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan.Config.SSH.ConfigFile, plan.Config.SSH.KnownHosts = "/dev/null", f.opts.KnownHosts[0]
	t.Setenv("SSH_AUTH_SOCK", "")
	m, err := fleet.NewManifest(t.TempDir(), "ssh", "run1", nil)
	if err != nil {
		t.Fatal(err)
	}
	o := fleet.Object{Kind: ObjectKind, Name: dir, Host: Address(f.target), Via: "127.0.0.1", Identity: f.target.IdentityFiles[0]}
	defer func(d time.Duration) { cleanTimeout = d }(cleanTimeout)
	cleanTimeout = 2 * time.Second
	done := make(chan error, 1)
	go func() { done <- Removers().ByKind[ObjectKind](context.Background(), plan, m, o, func(string) {}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "deadline") {
			t.Fatalf("a hung rm: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("clean of a host whose rm hangs did not end")
	}
}
