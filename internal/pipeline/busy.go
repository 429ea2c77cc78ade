package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/busy"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

// busyBefore reads the slot's GPUs before the engine starts (three readings 0.5 s apart on a live
// GPU, the least kept) and says the first GPU that is not gpuvet's alone (Endpoint.Busy).
func (r *run) busyBefore(ctx context.Context, slot Slot, allow bool) *results.Busy {
	occ, ok := r.src.(gpu.Occupier)
	if !ok {
		return nil
	}
	n := 1
	if r.srcName == sourceNVML {
		n = 3
	}
	for _, g := range slot.GPUs {
		var rs []results.Occupancy
		for i := 0; i < n && ctx.Err() == nil; i++ {
			if i > 0 {
				time.Sleep(500 * time.Millisecond)
			}
			if o, err := occ.Occupancy(g); err == nil {
				rs = append(rs, o)
			}
		}
		if len(rs) == 0 {
			continue
		}
		x := busy.Least(rs)
		// The workers of an engine this run just stopped can take seconds to release a large
		// context, reparented (no longer gpuvet's descendants): a process that leaves within
		// exitWait was one of them; a co-tenant stays.
		for waited := time.Duration(0); n > 1 && len(busy.Foreign(x)) > 0 && waited < exitWait && ctx.Err() == nil; waited += time.Second {
			time.Sleep(time.Second)
			if o, err := occ.Occupancy(g); err == nil {
				x = busy.Least(append(rs, o))
			}
		}
		if why := busy.Reason(x, busy.Options{}); why != "" {
			return &results.Busy{When: "before the engine", Reason: fmt.Sprintf("gpu %d %s", g, why), Occupancy: x, Allowed: allow}
		}
	}
	return nil
}

// exitWait is how long busyBefore waits for foreign processes to leave a live GPU.
const exitWait = 10 * time.Second

// busyWatch reads the slot's GPUs at every power sample of a load and keeps the first foreign
// process new since the load started, or memory none of theirs holds grown past busy.MemoryMiB.
type busyWatch struct {
	occ   gpu.Occupier
	gpus  []int
	allow bool
	start time.Time
	base  map[int]int64
	known map[int]bool // foreign PIDs on the GPUs when the load started (said before the engine)

	mu    sync.Mutex
	rungs []float64 // start time of rung i, seconds since start
	found *results.Busy
}

func newBusyWatch(src Source, gpus []int, allow bool) *busyWatch {
	occ, ok := src.(gpu.Occupier)
	if !ok || len(gpus) == 0 {
		return nil
	}
	w := &busyWatch{occ: occ, gpus: gpus, allow: allow, start: time.Now(), base: map[int]int64{}, known: map[int]bool{}}
	for _, g := range gpus {
		if o, err := occ.Occupancy(g); err == nil {
			w.base[g] = busy.UnaccountedMiB(o)
			for _, p := range busy.Foreign(o) {
				w.known[p.PID] = true
			}
		}
	}
	return w
}

// rung records that load rung i starts now.
func (w *busyWatch) rung(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.rungs) <= i {
		w.rungs = append(w.rungs, -1)
	}
	w.rungs[i] = time.Since(w.start).Seconds()
}

// check reads the GPUs once; the first busy reading is kept with its time and rung.
func (w *busyWatch) check() {
	w.mu.Lock()
	done := w.found != nil
	w.mu.Unlock()
	if done {
		return
	}
	for _, g := range w.gpus {
		o, err := w.occ.Occupancy(g)
		if err != nil {
			continue
		}
		why := busy.Reason(o, busy.Options{DuringLoad: true, BaselineMiB: w.base[g], Known: w.known})
		if why == "" {
			continue
		}
		t := time.Since(w.start).Seconds()
		w.mu.Lock()
		b := &results.Busy{When: "during the load", T: &t, Reason: fmt.Sprintf("gpu %d %s", g, why), Occupancy: o, Allowed: w.allow}
		for i, s := range w.rungs {
			if s >= 0 && s <= t {
				b.Rung = ptrInt(i)
			}
		}
		w.found = b
		w.mu.Unlock()
		return
	}
}

// result is what the watch found (nil: nothing); it marks the rung it was found in and every later
// one (a co-tenant is not known to have left), every rung of a retried sweep.
func (w *busyWatch) result(ld *results.Load) *results.Busy {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.found
	if b == nil || b.Allowed || ld == nil {
		return b
	}
	from := 0
	if b.Rung != nil && !ld.Retried {
		from = *b.Rung
	}
	for i := from; i < len(ld.Runs); i++ {
		ld.Runs[i].Busy = b.Reason
	}
	return b
}

func ptrInt(v int) *int { return &v }
