package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// profileEnv names a file for a CPU profile of the process; heapProfileEnv one for the heap profile
// at its peak and FILE.goroutines, every stack each 30 s (what a stalled run waits on). For
// engineers (docs/k8s-scale.md).
const (
	profileEnv     = "GPUVET_CPUPROFILE"
	heapProfileEnv = "GPUVET_HEAPPROFILE"
)

// startProfile starts the profiles that profileEnv and heapProfileEnv ask for and returns what ends
// them; a profile that cannot start is said once and the run goes on without it.
func startProfile() func() {
	stopCPU, stopHeap := startCPUProfile(), startHeapProfile()
	return func() { stopCPU(); stopHeap() }
}

func startCPUProfile() func() {
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

// startHeapProfile rewrites the heap profile each time the heap in use passes its highest so far,
// so the file left at the end shows the peak, not the quiet heap after the run.
func startHeapProfile() func() {
	path := os.Getenv(heapProfileEnv)
	if path == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		var peak uint64
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if n%30 == 0 {
				_ = writeProfile("goroutine", path+".goroutines", 1)
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse <= peak {
				continue
			}
			peak = m.HeapInuse
			if err := writeProfile("heap", path, 0); err != nil {
				fmt.Fprintf(os.Stderr, "gpuvet: %s=%s: no heap profile: %v\n", heapProfileEnv, path, err)
				return
			}
		}
	}()
	return func() { close(done) }
}

// writeProfile writes the named runtime profile to path (debug 0: pprof's format; 1: text).
func writeProfile(name, path string, debug int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
