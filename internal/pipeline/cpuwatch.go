package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/cpuwait"
	"github.com/gpuvet/gpuvet/internal/results"
)

// cpuWatch reads how long the engine's processes waited for a CPU, through a load: an engine on a
// healthy GPU serves slower on a host whose CPUs other work holds, and the judge must put that gap
// on the host, not on the GPU. Each rung gets the share of its window (Run.EngineCPUWaitPct).
type cpuWatch struct {
	stopOnce sync.Once
	done     chan struct{}
	mu       sync.Mutex
	samples  []cpuwait.Sample
}

// cpuWatchEvery is how often the engine's threads are read: a rung lasts seconds to minutes.
const cpuWatchEvery = 500 * time.Millisecond

// maxCPUSamples bounds the watch's memory (a day of samples).
const maxCPUSamples = 2 * 86400

// watchCPU starts the watch of process pid and its descendants; nil when the engine is not a
// process of this host (pid 0: an endpoint, a pod) or its schedstat cannot be read (not Linux).
func watchCPU(ctx context.Context, pid int) *cpuWatch {
	if pid <= 0 {
		return nil
	}
	first, err := cpuwait.Read("/proc", pid)
	if err != nil {
		return nil
	}
	w := &cpuWatch{done: make(chan struct{}), samples: []cpuwait.Sample{first}}
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
				if s, err := cpuwait.Read("/proc", pid); err == nil {
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
		if pct, ok := cpuwait.Over(w.samples, from, from.Add(time.Duration(r.WindowSeconds*float64(time.Second)))); ok {
			r.EngineCPUWaitPct = &pct
		}
	}
}
