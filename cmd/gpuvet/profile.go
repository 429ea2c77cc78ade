package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// profileEnv names a file for a CPU profile of the whole process (`go tool pprof gpuvet FILE`):
// for engineers finding where a run's own CPU goes (docs/k8s-scale.md), not a user setting.
const profileEnv = "GPUVET_CPUPROFILE"

// startProfile starts the CPU profile that profileEnv asks for and returns what ends it; a profile
// that cannot start is said once and the run goes on without it.
func startProfile() func() {
	path := os.Getenv(profileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gpuvet: %s=%s: no CPU profile: %v\n", profileEnv, path, err)
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
