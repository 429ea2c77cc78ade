// Package busy is the one rule that says a GPU is not gpuvet's alone: another process on it, or
// load that no process of gpuvet's accounts for. The health phase applies it before the
// benchmarks, the pipeline before each engine starts and during the load, and the judge turns what
// they recorded into flags. It reads results.Occupancy only (the sources fill it: NVML, a captured
// nvidia-smi XML, the simulator), so every caller decides the same way.
package busy

import (
	"fmt"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Thresholds of an idle GPU. An idle H200 draws 78-124 W of its 700 W (0.11-0.18 of the limit),
// shows 0 % utilisation a second after a load (23 % right after one, fixtures), and 618 MiB in use
// (the driver's reserve); a co-tenant running a BF16 GEMM loop drew 693 W at 100 %.
const (
	// UtilPct: utilisation at or above this in every reading is not idle.
	UtilPct = 40
	// PowerShare: power at or above this share of the power limit in every reading is not idle.
	PowerShare = 0.40
	// MemoryMiB: memory in use beyond what gpuvet's own processes hold (and the baseline) at or
	// above this is someone else's: the driver's reserve (~0.6 GiB) and a CUDA context of gpuvet's
	// that the driver does not list (~0.5 GiB) stay below it.
	MemoryMiB = 2048
)

// Options say what the caller already knows about the GPU.
type Options struct {
	// DuringLoad: utilisation and power are the engine's own (only processes and memory count).
	DuringLoad bool
	// BaselineMiB is memory in use already accounted for (during the load: what was in use, beyond
	// gpuvet's listed processes, when the engine had started).
	BaselineMiB int64
	// Known are PIDs already reported (a co-tenant flagged before the engine started is not news
	// during its load); their memory stays accounted for.
	Known map[int]bool
}

// Reason says why the GPU is not gpuvet's alone ("" when it is): another process first, by PID,
// name and memory; else load with no process to explain it (utilisation, power, memory in use).
func Reason(o results.Occupancy, opt Options) string {
	var parts []string
	for _, p := range Foreign(o) {
		if !opt.Known[p.PID] {
			parts = append(parts, describe(p))
		}
	}
	if len(parts) > 0 {
		return "busy: " + strings.Join(parts, "; ")
	}
	var signs []string
	if !opt.DuringLoad && o.PowerW != nil && o.PowerLimitW != nil && *o.PowerLimitW > 0 && *o.PowerW >= PowerShare**o.PowerLimitW {
		signs = append(signs, fmt.Sprintf("%.0f W", *o.PowerW))
	}
	if !opt.DuringLoad && o.UtilPct != nil && *o.UtilPct >= UtilPct {
		signs = append(signs, fmt.Sprintf("%d %% utilization", *o.UtilPct))
	}
	if m := UnaccountedMiB(o) - opt.BaselineMiB; m >= MemoryMiB {
		signs = append(signs, fmt.Sprintf("%s in use", GiB(m)))
	}
	if len(signs) == 0 {
		return ""
	}
	why := "no process visible"
	if !o.ProcessesListed {
		why = "no process list from this source"
	}
	return "not idle: " + strings.Join(signs, ", ") + ", " + why
}

// Foreign lists the processes on the GPU that are not gpuvet's or its engine's.
func Foreign(o results.Occupancy) []results.GPUProcess {
	var out []results.GPUProcess
	for _, p := range o.Processes {
		if !p.Own {
			out = append(out, p)
		}
	}
	return out
}

// UnaccountedMiB is the memory in use that no listed process of gpuvet's holds (0 when unknown).
func UnaccountedMiB(o results.Occupancy) int64 {
	if o.MemoryUsedMiB == nil {
		return 0
	}
	m := *o.MemoryUsedMiB
	for _, p := range o.Processes {
		if p.UsedMiB != nil {
			m -= *p.UsedMiB
		}
	}
	return max(m, 0)
}

func describe(p results.GPUProcess) string {
	s := fmt.Sprintf("PID %d", p.PID)
	if p.Name != "" {
		s += " " + p.Name
	}
	if p.Hidden {
		s += " (not in this PID namespace: another container or the host)"
	}
	if p.UsedMiB != nil {
		s += ", " + GiB(*p.UsedMiB)
	}
	return s
}

// GiB writes MiB as "8.1 GiB" (or "512 MiB" below 1 GiB).
func GiB(mib int64) string {
	if mib < 1024 {
		return fmt.Sprintf("%d MiB", mib)
	}
	return fmt.Sprintf("%.1f GiB", float64(mib)/1024)
}

// Least merges readings taken a moment apart: the least utilisation and power (a load that ended
// settles within a second, a co-tenant's does not), and the processes and memory of the last
// reading (an engine gpuvet just stopped may still be exiting in the first).
func Least(rs []results.Occupancy) results.Occupancy {
	if len(rs) == 0 {
		return results.Occupancy{}
	}
	last := rs[len(rs)-1]
	out := last
	out.Processes = append([]results.GPUProcess(nil), last.Processes...)
	out.Samples = len(rs)
	out.Notes = nil
	for _, r := range rs {
		out.UtilPct = leastPtr(out.UtilPct, r.UtilPct)
		out.PowerW = leastPtr(out.PowerW, r.PowerW)
		if out.PowerLimitW == nil {
			out.PowerLimitW = r.PowerLimitW
		}
		for _, n := range r.Notes {
			if !contains(out.Notes, n) {
				out.Notes = append(out.Notes, n)
			}
		}
	}
	return out
}

func leastPtr[T int | float64](a, b *T) *T {
	switch {
	case a == nil:
		return b
	case b == nil || *a <= *b:
		return a
	}
	return b
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
