package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A co-tenant is another process on a virtual GPU (FleetConfig.CoTenant): what a shared or
// mis-scheduled node looks like. While it runs, the GPU reports it as a compute process (PID
// CoTenantPID, python3, CoTenantMiB), sits at 100 % utilisation and near its power limit however
// idle gpuvet leaves it, and every benchmark and engine started on it runs at CoTenantSpeed: a
// BF16 GEMM loop beside gpuvet on a real H200 left it 0.32-0.41 of its datasheet peaks, against
// 0.79-0.89 alone (issue 26).
const (
	CoTenantPID   = 4242
	CoTenantName  = "python3"
	CoTenantMiB   = 8294
	CoTenantSpeed = 0.45
)

// coTenant is a parsed CoTenant; gpu -1: none. It runs from `from` to `to` after the fleet was made
// (to 0: to the end).
type coTenant struct {
	gpu      int
	from, to time.Duration
}

// parseCoTenant reads "GPU", "GPU:FROM" or "GPU:FROM-TO" (Go durations since the fleet started, e.g.
// "1:3s-10s"); "" is none.
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
	if !hasSpan {
		return c, nil
	}
	from, to, hasTo := strings.Cut(span, "-")
	if c.from, err = time.ParseDuration(strings.TrimSpace(from)); err != nil || c.from < 0 {
		return bad("FROM is not a duration ≥ 0")
	}
	if hasTo {
		if c.to, err = time.ParseDuration(strings.TrimSpace(to)); err != nil || c.to <= c.from {
			return bad("TO is not a duration after FROM")
		}
	}
	return c, nil
}

// coTenantOn says whether the co-tenant runs on GPU i now.
func (f *Fleet) coTenantOn(i int, now time.Time) bool {
	c := f.cotenant
	if c.gpu != i {
		return false
	}
	el := now.Sub(f.start)
	return el >= c.from && (c.to == 0 || el < c.to)
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
		o.Processes = append(o.Processes, results.GPUProcess{PID: os.Getpid(), Name: "gpuvet", Type: "compute", UsedMiB: ptr(used), Own: true})
	}
	total := used
	if f.coTenantOn(i, time.Now()) {
		o.Processes = append(o.Processes, results.GPUProcess{PID: CoTenantPID, Name: CoTenantName, Type: "compute", UsedMiB: ptr(int64(CoTenantMiB))})
		total += CoTenantMiB
	}
	limit := f.gpu.TDPW
	o.MemoryUsedMiB, o.UtilPct, o.PowerW, o.PowerLimitW = ptr(total), ptr(s.UtilPct), ptr(s.PowerW), &limit
	return o, nil
}

func ptr[T any](v T) *T { return &v }
