package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// cleanIn runs `gpuvet clean ARGS` in its own process with state dir dir, under a memory bound
// (a clean that reads without bounds fails here, not on the machine) and a time bound (one that
// waits on a FIFO is killed); it returns the exit code and the output.
func cleanIn(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	self, _ := os.Executable()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -v 4000000; exec "$@"`, "sh", self, "clean"}, args...)...)
	cmd.Env = append(os.Environ(), "GPUVET_TEST_AS_GPUVET=1", "GPUVET_STATE_DIR="+dir, "SSH_AUTH_SOCK=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("clean %v did not end within 20 s (it waits on something it should never read)", args)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// keptManifest writes the manifest of a killed ssh run in dir: one remote folder still listed.
func keptManifest(t *testing.T, dir, runID string) *fleet.Manifest {
	t.Helper()
	m, err := fleet.NewManifest(dir, "ssh", runID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Record(fleet.Object{Kind: "ssh-dir", Name: "/tmp/gpuvet-" + runID, Host: "root@192.0.2.1:22"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Keep(); err != nil {
		t.Fatal(err)
	}
	return m
}

// Finding 1: a journal that is a link to another file (a token) is never written through, by a
// clean of every manifest or of another run; a run's manifest is read only when --run names it;
// a live run's journal is never cut, even with a half line at its end.
func TestCleanNeverWritesThroughALink(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(t.TempDir(), "token")
	const secret = "hf_abcdefghijklmnopqrstuvwxyz" // one line, no newline: "a line cut short"
	if err := os.WriteFile(token, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	m := keptManifest(t, dir, "r1")
	jp := strings.TrimSuffix(m.Path(), ".json") + ".jsonl"
	if err := os.Symlink(token, jp); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--run", "nosuchrun"}, nil, {"--run", "r1"}, {"--manifest", m.Path()}} {
		code, out, errOut := cleanIn(t, dir, args...)
		if b, _ := os.ReadFile(token); string(b) != secret {
			t.Fatalf("clean %v wrote through the journal's link: the token file holds %q now\n%s%s", args, b, out, errOut)
		}
		if code == 0 || strings.Contains(out+errOut, secret) {
			t.Errorf("clean %v: exit %d (want a refusal), output:\n%s%s", args, code, out, errOut)
		}
	}
	// Another run's manifest is not even read when --run names one.
	os.Remove(jp)
	os.WriteFile(filepath.Join(dir, "ssh-other.json"), []byte("{garbage"), 0o644)
	if code, out, errOut := cleanIn(t, dir, "--run", "nosuchrun"); code != exitBadUsage || strings.Contains(out+errOut, "ssh-other") {
		t.Errorf("clean --run nosuchrun read another run's manifest: exit %d\n%s%s", code, out, errOut)
	}
}

// Finding 1: a live run's manifest (its lock held by the run) is left to it: never repaired, never
// cleaned, never removed.
func TestCleanLeavesALiveRunsManifest(t *testing.T) {
	dir := t.TempDir()
	m := keptManifest(t, dir, "r2")
	jp := strings.TrimSuffix(m.Path(), ".json") + ".jsonl"
	half := `{"record":{"kind":"ssh-dir","name":"/tmp/gpuvet-r2-b","host":"root@192.0.2.1:22"`
	if err := os.WriteFile(jp, []byte(half), 0o644); err != nil { // mid-append
		t.Fatal(err)
	}
	lock, err := os.OpenFile(strings.TrimSuffix(m.Path(), ".json")+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil { // the run, still going
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--run", "r2"}, {"--manifest", m.Path()}} {
		code, out, errOut := cleanIn(t, dir, args...)
		if code != exitBadUsage || !strings.Contains(errOut, "held by the gpuvet that runs ssh-r2") {
			t.Errorf("clean %v of a live run: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	code, out, errOut := cleanIn(t, dir)
	if code != 0 || !strings.Contains(errOut, "left alone") {
		t.Errorf("clean of every run beside a live one: exit %d\n%s%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(jp); string(b) != half {
		t.Fatalf("a live run's journal was cut: %q", b)
	}
	if _, err := os.Stat(m.Path()); err != nil {
		t.Fatalf("a live run's manifest was removed: %v", err)
	}
}

// Finding 2: a fleet summary (backend and run_id, like a manifest) or any other JSON is refused
// with exit 2 and left as it is.
func TestCleanRefusesASummary(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "out")
	sum := filepath.Join(out, "summary.json")
	s := &results.Summary{RunID: "20261203T000000Z-abc", Backend: "ssh", Status: results.StatusIncomplete}
	if err := results.WriteJSON(sum, s); err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(dir, "ssh-20261203T000000Z-abc.json") // even under a manifest's name
	b, _ := os.ReadFile(sum)
	os.WriteFile(named, b, 0o644)
	for _, f := range []string{sum, named} {
		code, stdout, errOut := cleanIn(t, dir, "--manifest", f)
		if code != exitBadUsage || !strings.Contains(errOut, "not a gpuvet run manifest") {
			t.Errorf("clean --manifest %s: exit %d\n%s%s", f, code, stdout, errOut)
		}
		if _, err := os.Stat(f); err != nil {
			t.Errorf("clean --manifest %s removed it: %v", f, err)
		}
	}
}

// Finding 4: what clean reads is a regular file under its bound, with bounded lines: a device, a
// link to one, a FIFO are refused at once; a journal line of megabytes is refused with an error
// that quotes none of it.
func TestCleanBoundedReads(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(t.TempDir(), "ssh-f.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"/dev/zero", fifo} {
		code, out, errOut := cleanIn(t, dir, "--manifest", f)
		if code != exitBadUsage || !strings.Contains(errOut, "not a regular file") {
			t.Errorf("clean --manifest %s: exit %d\n%s%s", f, code, out, errOut)
		}
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "ssh-z.json")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cleanIn(t, dir); !strings.Contains(errOut, "symbolic link") {
		t.Errorf("clean with a link to /dev/zero in the state dir: exit %d\n%s%s", code, out, errOut)
	}
	os.Remove(filepath.Join(dir, "ssh-z.json"))
	m := keptManifest(t, dir, "r3")
	jp := strings.TrimSuffix(m.Path(), ".json") + ".jsonl"
	long := `{"record":{"kind":"ssh-dir","name":"/tmp/` + strings.Repeat("A", 8<<20) + `","host":"root@192.0.2.1:22"}}` + "\n" +
		`{"deleted":[{"kind":"ssh-dir","name":"/tmp/gpuvet-r3","host":"root@192.0.2.1:22"}]}` + "\n"
	if err := os.WriteFile(jp, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cleanIn(t, dir, "--run", "r3")
	if code != exitBadUsage || len(out)+len(errOut) > 4096 || !strings.Contains(errOut, "line 1") {
		t.Errorf("a journal line of 8 MiB: exit %d, %d bytes of output: %.500s", code, len(out)+len(errOut), out+errOut)
	}
}

// Issue 51: clean advised `clean --run R` for an object it refuses every time (a host whose key
// it cannot vouch for), and never how to drop the manifest. --forget drops one run's manifest,
// naming what it listed and touching none of it; without a run or file it is refused.
func TestCleanForgetDropsTheManifestOnly(t *testing.T) {
	dir := t.TempDir()
	m := keptManifest(t, dir, "r1")
	code, out, errOut := cleanIn(t, dir, "--run", "r1")
	if code != 1 || !strings.Contains(out+errOut, "gpuvet clean --run r1 --forget") {
		t.Fatalf("clean of an object it cannot remove: exit %d, want 1 and the way out:\n%s%s", code, out, errOut)
	}
	if code, out, errOut = cleanIn(t, dir, "--forget"); code != 2 || !strings.Contains(errOut, "name the run with --run") {
		t.Fatalf("--forget of every run: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(m.Path()); err != nil {
		t.Fatalf("the refused --forget removed the manifest: %v", err)
	}
	code, out, errOut = cleanIn(t, dir, "--run", "r1", "--forget")
	if code != 0 || !strings.Contains(out, "forgot (not removed, yours to check): ") || !strings.Contains(out, "192.0.2.1") || !strings.Contains(out, "dropped manifest") {
		t.Fatalf("--run r1 --forget: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(m.Path()); !os.IsNotExist(err) {
		t.Fatalf("manifest still there: %v", err)
	}
}
