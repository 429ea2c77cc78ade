package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuvet/gpuvet/internal/pipeline"
)

// Issue 51: every output path of `gpuvet report` and `gpuvet health --out` is one it may replace:
// a FIFO, a character device (made in the test's folder, when root), a symlink to a canary, the
// command's own input and a folder are refused before anything is written (exit 2), and none of
// them is replaced.
func TestOutputPathsNeverReplaceWhatTheyMayNot(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(sampleSummary)
	if err != nil {
		t.Fatal(err)
	}
	sum := filepath.Join(dir, "summary.json")
	if err := os.WriteFile(sum, b, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	canary := filepath.Join(dir, "canary")
	os.WriteFile(canary, []byte("canary"), 0o644)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(canary, link); err != nil {
		t.Fatal(err)
	}
	targets := map[string]string{"a FIFO": fifo, "a symlink to a canary": link, "its own input": sum, "a folder": dir}
	if os.Geteuid() == 0 {
		dev := filepath.Join(dir, "null")
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, int(1<<8|3)); err == nil { // 1:3, /dev/null's numbers
			targets["a character device"] = dev
		}
	}
	for what, path := range targets {
		before, _ := os.Lstat(path)
		for _, flag := range []string{"--html", "--junit", "--ctrf", "--prom"} {
			if code := execute([]string{"report", sum, flag, path}); code != exitBadUsage {
				t.Errorf("report %s %s: exit %d, want %d", flag, what, code, exitBadUsage)
			}
		}
		if what == "a character device" { // said in words, not as Go's mode string (Dc---------)
			var stdout, stderr bytes.Buffer
			if executeTo([]string{"report", sum, "--html", path}, &stdout, &stderr); !strings.Contains(stderr.String(), "is a character device, not a regular file") {
				t.Errorf("the refusal does not say what the file is:\n%s", stderr.String())
			}
		}
		if what != "its own input" {
			if code := execute([]string{"health", "--sim", "--sim-gpus", "1", "--dcgm=false", "--out", path}); code != exitBadUsage {
				t.Errorf("health --out %s: exit %d, want %d", what, code, exitBadUsage)
			}
			// Every other command's output file too (a down server: the path is refused first).
			db := "--set=history.url=sqlite://" + filepath.Join(t.TempDir(), "h.db")
			for _, args := range [][]string{
				{"report", sum, "--pdf", path},
				{"history", "export", db, "-o", path},
				{"bench", "--url", "http://127.0.0.1:1", "--model", "m", "--out", path},
				{"probe", "http://127.0.0.1:1", "--model", "m", "--out", path},
			} {
				var stdout, stderr bytes.Buffer
				if code := executeTo(args, &stdout, &stderr); code != exitBadUsage || !strings.Contains(stderr.String(), path) {
					t.Errorf("%v (%s): exit %d, want %d naming the path:\n%s", args, what, code, exitBadUsage, stderr.String())
				}
			}
		}
		after, err := os.Lstat(path)
		if err != nil || !os.SameFile(before, after) || before.Mode() != after.Mode() {
			t.Errorf("%s was replaced: %v", what, err)
		}
	}
	if c, _ := os.ReadFile(canary); string(c) != "canary" {
		t.Errorf("the canary behind the symlink changed: %q", c)
	}
	if got, _ := os.ReadFile(sum); string(got) != string(b) {
		t.Errorf("the input summary changed")
	}
	// A regular file and a new one in a new folder are still written.
	for _, p := range []string{canary, filepath.Join(dir, "new", "r.html")} {
		if code := execute([]string{"report", sum, "--html", p}); code != exitOK {
			t.Errorf("report --html %s: exit %d", p, code)
		}
	}
}

// The output folder's lock is gpuvet's own file: nothing of it stays once the lock is released,
// after a run and after a refusal alike, and the folder can be locked again.
func TestOutputLockLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	l, _, err := pipeline.LockOutput(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pipeline.LockOutput(dir, false); err == nil {
		t.Fatal("a second lock of a held folder")
	}
	l.Release()
	if _, err := os.Stat(filepath.Join(dir, ".gpuvet.lock")); !os.IsNotExist(err) {
		t.Errorf("the lock file stayed: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "summary.json"), []byte("{}"), 0o644) // an earlier run's results
	if _, _, err := pipeline.LockOutput(dir, false); err == nil {
		t.Fatal("an earlier run's folder taken without --force")
	}
	if _, err := os.Stat(filepath.Join(dir, ".gpuvet.lock")); !os.IsNotExist(err) {
		t.Errorf("the refused run left its lock file: %v", err)
	}
}
