package main

import (
	"runtime/debug"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/load"
)

// main sets the limit load asks for and gives the previous one back; GOMEMLIMIT wins.
func TestSoftMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	restore := softMemoryLimit(100_000)
	if got, want := debug.SetMemoryLimit(-1), load.MemoryLimit(100_000); got != want {
		t.Errorf("limit %d during the run, want %d", got, want)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("limit %d after the run, want the one before, %d", got, before)
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	softMemoryLimit(100_000)()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("GOMEMLIMIT set: limit changed to %d", got)
	}
}

// A plan's streams: every parallel slot's profile (the sweep's in-flight cap) or aicr run, the larger.
func TestPlanStreams(t *testing.T) {
	c := config.Defaults()
	c.Run.ParallelGPUs = 1
	one := planStreams(c)
	if one != 1024 { // a sweep at max_concurrency 128 caps open-loop requests at max(4 × 128, 1024)
		t.Errorf("default plan: %d streams, want 1024", one)
	}
	c.Run.ParallelGPUs, c.Load.Concurrency = 4, 5000
	if got := planStreams(c); got != 4*5000 {
		t.Errorf("4 slots with a 5000-stream aicr run: %d streams, want 20000", got)
	}
	// auto: the most GPUs the run may load at once (an 8-GPU node unless the plan says fewer).
	c.Run.ParallelGPUs, c.Load.Concurrency = config.AutoGPUs, 256
	if got := planStreams(c); got != 8*1024 {
		t.Errorf("auto on a host: %d streams, want 8 × 1024", got)
	}
	c.Backend, c.Sim.GPUs = "sim", 3
	if got := planStreams(c); got != 3*1024 {
		t.Errorf("auto on 3 simulated GPUs: %d streams, want 3 × 1024", got)
	}
}
