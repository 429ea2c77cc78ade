package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A co-tenant is another process on a virtual GPU (FleetConfig.CoTenant): while it runs, the GPU
// lists it as a compute process, sits at 100 % utilisation near its power limit, and everything on
// it runs at CoTenantSpeed: a BF16 GEMM loop beside gpuvet on a real H200 left it 0.32-0.41 of its
// datasheet peaks, against 0.79-0.89 alone.
const (
	CoTenantPID   = 4242
	CoTenantName  = "python3"
	CoTenantMiB   = 8294
	CoTenantSpeed = 0.45
)

// coTenant is a parsed CoTenant; gpu -1: none.
type coTenant struct {
	gpu int
	window
}

// window is when a fault is on: from `from` to `to` after the fleet was made (to 0: to the end).
type window struct{ from, to time.Duration }

func (w window) on(f *Fleet, now time.Time) bool {
	el := now.Sub(f.start)
	return el >= w.from && (w.to == 0 || el < w.to)
}

// parseWindow reads "FROM[-TO]" (Go durations since the fleet started); why says what is wrong.
func parseWindow(span string) (w window, why string) {
	from, to, hasTo := strings.Cut(span, "-")
	var err error
	if w.from, err = time.ParseDuration(strings.TrimSpace(from)); err != nil || w.from < 0 {
		return w, "FROM is not a duration ≥ 0"
	}
	if hasTo {
		if w.to, err = time.ParseDuration(strings.TrimSpace(to)); err != nil || w.to <= w.from {
			return w, "TO is not a duration after FROM"
		}
	}
	return w, ""
}

// parseCoTenant reads "GPU", "GPU:FROM" or "GPU:FROM-TO" (e.g. "1:3s-10s"); "" is none.
func parseCoTenant(s string, count int) (coTenant, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return coTenant{gpu: -1}, nil
	}
	bad := func(why string) (coTenant, error) {
		return coTenant{}, fmt.Errorf("co-tenant %q: %s; want GPU[:FROM[-TO]] with GPU 0–%d and Go durations, e.g. 1 or 1:5s or 1:5s-20s", s, why, count-1)
	}
	idx, span, hasSpan := strings.Cut(s, ":")
	n, err := strconv.Atoi(strings.TrimSpace(idx))
	if err != nil || n < 0 || n >= count {
		return bad("no such GPU")
	}
	c := coTenant{gpu: n}
	if hasSpan {
		var why string
		if c.window, why = parseWindow(span); why != "" {
			return bad(why)
		}
	}
	return c, nil
}

// coTenantOn says whether the co-tenant runs on GPU i now.
func (f *Fleet) coTenantOn(i int, now time.Time) bool {
	return f.cotenant.gpu == i && f.cotenant.on(f, now)
}

// Occupancy is what NVML would list on GPU i: the attached engine (this process: the simulator
// serves in-process, so it is gpuvet's own) and the co-tenant while it runs, memory in use, and the
// utilisation and power of the current sampling window.
func (f *Fleet) Occupancy(i int) (results.Occupancy, error) {
	s, err := f.sample(i, false)
	if err != nil {
		return results.Occupancy{}, err
	}
	f.mu.Lock()
	used := f.gpus[i].usedMiB
	f.mu.Unlock()
	o := results.Occupancy{ProcessesListed: true, Samples: 1}
	if used > 0 {
		o.Processes = append(o.Processes, results.GPUProcess{PID: os.Getpid(), Name: "gpuvet", Type: "compute", UsedMiB: new(used), Own: true})
	}
	total := used
	if f.coTenantOn(i, time.Now()) {
		o.Processes = append(o.Processes, results.GPUProcess{PID: CoTenantPID, Name: CoTenantName, Type: "compute", UsedMiB: new(int64(CoTenantMiB))})
		total += CoTenantMiB
	}
	o.MemoryUsedMiB, o.UtilPct, o.PowerW, o.PowerLimitW = new(total), new(s.UtilPct), new(s.PowerW), new(f.gpu.TDPW)
	return o, nil
}
