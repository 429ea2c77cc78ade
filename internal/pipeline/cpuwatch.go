package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/cpuwait"
	"github.com/gpuvet/gpuvet/internal/results"
)

// cpuWatch reads how long the engine's processes waited for a CPU through a load, so the judge puts
// that gap on the host, not the GPU: each rung gets its window's share (Run.EngineCPUWaitPct), or,
// for an engine in a pod beside the load's, the host's CPU pressure (Run.HostCPUPressurePct).
type cpuWatch struct {
	read     func() (cpuwait.Sample, error)
	host     bool // the host's pressure, not the engine's own wait
	stopOnce sync.Once
	done     chan struct{}
	mu       sync.Mutex
	samples  []cpuwait.Sample
}

// cpuWatchEvery is how often the engine's threads are read: a rung lasts seconds to minutes.
const cpuWatchEvery = 500 * time.Millisecond

// maxCPUSamples bounds the watch's memory (a day of samples).
const maxCPUSamples = 2 * 86400

// watchCPU watches the engine's process tree (sv.PID), else the host's CPU pressure
// (sv.SharesHost); nil when neither, or it cannot be read (not Linux, no PSI).
func watchCPU(ctx context.Context, sv *Served) *cpuWatch {
	w := &cpuWatch{done: make(chan struct{})}
	switch {
	case sv.PID > 0:
		w.read = func() (cpuwait.Sample, error) { return cpuwait.Read("/proc", sv.PID) }
	case sv.SharesHost:
		w.read, w.host = func() (cpuwait.Sample, error) { return cpuwait.ReadPressure("/proc") }, true
	default:
		return nil
	}
	first, err := w.read()
	if err != nil {
		return nil
	}
	w.samples = []cpuwait.Sample{first}
	go func() {
		t := time.NewTicker(cpuWatchEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.done:
				return
			case <-t.C:
				if s, err := w.read(); err == nil {
					w.mu.Lock()
					if len(w.samples) < maxCPUSamples {
						w.samples = append(w.samples, s)
					}
					w.mu.Unlock()
				}
			}
		}
	}()
	return w
}

// stop ends the watch and marks every rung of ld whose window it covered.
func (w *cpuWatch) stop(ld *results.Load) {
	if w == nil {
		return
	}
	w.stopOnce.Do(func() { close(w.done) })
	w.mu.Lock()
	defer w.mu.Unlock()
	if ld == nil || ld.StartedAt.IsZero() {
		return
	}
	for i := range ld.Runs {
		r := &ld.Runs[i]
		if r.WindowSeconds <= 0 {
			continue
		}
		from := ld.StartedAt.Add(time.Duration(r.WindowStartS * float64(time.Second)))
		if pct, ok := cpuwait.Over(w.samples, from, from.Add(time.Duration(r.WindowSeconds*float64(time.Second)))); ok && w.host {
			r.HostCPUPressurePct = &pct
		} else if ok {
			r.EngineCPUWaitPct = &pct
		}
	}
}
