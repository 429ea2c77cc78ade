package report

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A browser that hangs is stopped at the timeout with everything it started: its renderer and GPU
// processes inherit its output, so killing the browser alone left them running and the report
// waiting on their output until they ended on their own.
func TestChromiumTimeoutStopsItsChildren(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	script := filepath.Join(dir, "chromium")
	body := "#!/bin/sh\nsleep 60 &\necho $! > " + pidFile + "\nsleep 60\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GPUVET_CHROMIUM", script)
	start := time.Now()
	_, _, err := runChromium(500*time.Millisecond, "--dump-dom", "file:///nonexistent")
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "did not finish") {
		t.Errorf("want a timeout error, got %v", err)
	}
	if took > 15*time.Second {
		t.Errorf("runChromium returned after %s, past its 500ms timeout", took.Round(time.Second))
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the browser's child %d still runs after the timeout", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
