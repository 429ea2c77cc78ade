package main

import (
	"os"
	"runtime/debug"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/load"
)

// softMemoryLimit sets the Go runtime's soft memory limit for a load client with streams in flight
// (load.MemoryLimit), unless GOMEMLIMIT is set (the user's word wins), and returns a function that
// restores the limit before it. Runtime settings are the program's: the load generator only says
// what it needs.
func softMemoryLimit(streams int) func() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(load.MemoryLimit(streams))
	return func() { debug.SetMemoryLimit(prev) }
}

// planStreams is the most load streams a plan has in flight at once: run.parallel_gpus slots, each
// running its profile and then, when aicr gates are set, a concurrency run (the larger of the two).
func planStreams(c config.Config) int {
	lc := c.LoadConfig()
	aicr := lc
	aicr.Profile, aicr.Concurrency = "concurrency", c.Load.Concurrency
	per := max(load.Streams(load.Options{Config: lc}), load.Streams(load.Options{Config: aicr}))
	return max(1, c.Run.ParallelGPUs) * per
}
