package main

import (
	"os"
	"runtime/debug"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/load"
)

// softMemoryLimit sets the Go runtime's soft memory limit for a load client with streams in flight
// (load.MemoryLimit: the load generator only says what it needs), unless GOMEMLIMIT is set, and
// returns what restores the limit before it.
func softMemoryLimit(streams int) func() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(load.MemoryLimit(streams))
	return func() { debug.SetMemoryLimit(prev) }
}

// planStreams is the most load streams a plan has in flight at once: run.parallel_gpus slots, each
// the larger of its profile and the aicr concurrency run. With auto, the most it can be is assumed.
func planStreams(c config.Config) int {
	lc := c.LoadConfig()
	aicr := lc
	aicr.Profile, aicr.Concurrency = "concurrency", c.Load.Concurrency
	per := max(load.Streams(load.Options{Config: lc}), load.Streams(load.Options{Config: aicr}))
	return atOnce(c) * per
}

// autoMaxGPUs is the most GPUs a host is assumed to have when the plan does not say (an 8-GPU node).
const autoMaxGPUs = 8

func atOnce(c config.Config) int {
	switch {
	case !c.Run.ParallelGPUs.Auto():
		return int(c.Run.ParallelGPUs)
	case c.Run.GPUCount > 0:
		return c.Run.GPUCount
	case backendkind.Of(c.Backend).Simulated:
		return max(1, c.Sim.GPUs)
	}
	return autoMaxGPUs
}
