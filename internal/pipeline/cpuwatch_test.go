package pipeline

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// spinner starts a shell loop that never sleeps, pinned to cpu (taskset); stopped at the end.
func spinner(t *testing.T, cpu string) *exec.Cmd {
	t.Helper()
	c := exec.Command("taskset", "-c", cpu, "sh", "-c", "while :; do :; done")
	if err := c.Start(); err != nil {
		t.Skipf("taskset: %v", err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// An "engine" that shares one CPU with two other busy processes waits for it about two thirds of the
// time it is runnable; the watch gives its rung that share, and a rung it did not cover none.
func TestCPUWatchReadsAStarvedEngine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("schedstat is Linux's")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset")
	}
	engine := spinner(t, "0")
	spinner(t, "0")
	spinner(t, "0")
	w := watchCPU(context.Background(), &Served{PID: engine.Process.Pid})
	if w == nil {
		t.Skip("no schedstat here")
	}
	start := time.Now()
	time.Sleep(2500 * time.Millisecond)
	ld := &results.Load{StartedAt: start, Runs: []results.Run{
		{Kind: "synchronous", WindowStartS: 0.5, WindowSeconds: 1.5},
		{Kind: "constant", WindowStartS: 60, WindowSeconds: 10}, // after the watch ended
	}}
	w.stop(ld)
	got := ld.Runs[0].EngineCPUWaitPct
	if got != nil {
		t.Logf("the engine waited %.1f %% of its runnable time", *got)
	}
	// About 67 % alone; more where other work shares CPU 0 (91-96 % at a load average of 15-26 here),
	// never all of it: the engine ran.
	if got == nil || *got < 40 || *got > 97 {
		t.Fatalf("a spinner sharing its CPU with two others waited %s of its runnable time, want about 67 %%", pct(got))
	}
	if ld.Runs[1].EngineCPUWaitPct != nil {
		t.Fatalf("a rung past the watch got a wait: %v", *ld.Runs[1].EngineCPUWaitPct)
	}
	if watchCPU(context.Background(), &Served{}) != nil {
		t.Fatal("an engine that is not a process of this host was watched")
	}
}

// An engine in a pod beside the load's (SharesHost) gets the host's CPU pressure: with two spinners
// on each of the machine's CPUs, some task waits nearly all the time.
func TestCPUWatchReadsTheHostsPressure(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset")
	}
	w := watchCPU(context.Background(), &Served{SharesHost: true})
	if w == nil {
		t.Skip("no CPU pressure (PSI) on this host")
	}
	for i := range runtime.NumCPU() {
		spinner(t, strconv.Itoa(i))
		spinner(t, strconv.Itoa(i))
	}
	start := time.Now()
	time.Sleep(2500 * time.Millisecond)
	ld := &results.Load{StartedAt: start, Runs: []results.Run{{Kind: "synchronous", WindowStartS: 0.5, WindowSeconds: 1.5}}}
	w.stop(ld)
	got := ld.Runs[0].HostCPUPressurePct
	if got == nil || *got < 50 || ld.Runs[0].EngineCPUWaitPct != nil {
		t.Fatalf("host pressure %v (engine wait %v) beside two spinners a CPU, want most of the window", got, ld.Runs[0].EngineCPUWaitPct)
	}
	t.Logf("some task waited %.1f %% of the window", *got)
}

// pct prints a wait that may be missing.
func pct(p *float64) string {
	if p == nil {
		return "no reading"
	}
	return fmt.Sprintf("%.1f %%", *p)
}
