package health

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuvet/gpuvet/internal/busy"
	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Check ids of the datasheet floors and the busy rule (issue 26).
const (
	CheckFloor = "health.datasheet_floor"
	CheckBusy  = "health.busy"
)

// Floor is the least share of its datasheet peak a healthy card of gpuName measures in benchmark
// name (a results.MicrobenchNames name, or results.FloorBurn, FloorPeerCopy, FloorAllReduce):
// FloorOverrides (--floor), else the reference table (Floors), else results.MicrobenchFloors.
func (o *Options) Floor(gpuName, name string) float64 {
	if v, ok := o.FloorOverrides[name]; ok {
		return v
	}
	if v, ok := o.Floors[gpuName][name]; ok {
		return v
	}
	return results.MicrobenchFloors()[name]
}

// checkBusy reads, before any benchmark, what else is on every GPU (a source that cannot say is
// noted) and records a GPU that is not gpuvet's alone in gh.Busy. A live GPU is read BusyReadings
// times BusyGap apart and the least utilisation and power kept: a load that just ended settles in
// that second, a co-tenant's does not.
func checkBusy(ctx context.Context, src gpu.Source, h *results.Health, o Options) {
	occ, ok := src.(gpu.Occupier)
	if !ok {
		h.Notes = append(h.Notes, fmt.Sprintf("busy check not run: the %s source cannot list a GPU's processes", o.Source))
		return
	}
	n, gap := o.BusyReadings, o.BusyGap
	if o.Source != "nvml" {
		n = 1 // a capture is one moment; the simulator's window is its own
	}
	readings := make([][]results.Occupancy, len(h.GPUs))
	for r := 0; r < n && ctx.Err() == nil; r++ {
		if r > 0 {
			time.Sleep(gap)
		}
		for i := range h.GPUs {
			x, err := occ.Occupancy(h.GPUs[i].GPU.Index)
			if err != nil {
				addNote(&h.GPUs[i], fmt.Sprintf("busy check: %v", err))
				continue
			}
			readings[i] = append(readings[i], x)
		}
	}
	for i := range h.GPUs {
		if len(readings[i]) == 0 {
			continue
		}
		x := busy.Least(readings[i])
		if why := busy.Reason(x, busy.Options{}); why != "" {
			h.GPUs[i].Busy = &results.Busy{When: "health", Reason: why, Occupancy: x, Allowed: o.AllowBusy}
			o.progress("gpu %d: %s", h.GPUs[i].GPU.Index, why)
		}
	}
}

// judgeBusyAndFloors flags a busy GPU (a note with --allow-busy) and every figure under its
// datasheet floor; a busy GPU's figures are marked and flagged, so none of them passes.
func judgeBusyAndFloors(gh *results.GPUHealth, o Options, flag func(check, format string, args ...any)) {
	marked := gh.Busy != nil && !gh.Busy.Allowed
	switch {
	case gh.Busy == nil:
	case gh.Busy.Allowed:
		addNote(gh, fmt.Sprintf("%s at the health phase; measured anyway (--allow-busy): the figures are not this GPU's alone", gh.Busy.Reason))
	default:
		flag(CheckBusy, "%s at the health phase: its figures are not this GPU's alone and pass nothing; stop the other process (`nvidia-smi` lists it where this container cannot), or pass --allow-busy to measure anyway", gh.Busy.Reason)
	}
	hint := "check clocks, power cap and cooling (`nvidia-smi -q -d PERFORMANCE,POWER`), then rerun; if this GPU model measures lower when healthy, set its floor in reference_floors (`gpuvet calibrate`)"
	if gh.Busy != nil {
		hint = "the GPU was not gpuvet's alone (see the busy flag); rerun when it is idle"
	}
	for i := range gh.Bench {
		b := &gh.Bench[i]
		if b.Status != results.StatusOK && b.Status != results.StatusFlag {
			continue
		}
		b.Busy = marked
		b.Status = results.StatusOK
		if marked {
			b.Status = results.StatusFlag
		}
		if b.Ratio == nil {
			continue
		}
		fl := o.Floor(gh.GPU.Name, b.Name)
		if fl <= 0 {
			continue
		}
		b.Floor = ptr(fl)
		if *b.Ratio < fl {
			b.Status = results.StatusFlag
			flag(CheckFloor, "%s %s %s is %s of the %s %s datasheet peak, under its %.2f floor: %s", b.Name, compare.Num(b.Value), b.Unit, ratio(*b.Ratio, fl), compare.Num(*b.Peak), b.Unit, fl, hint)
		}
	}
	if bu := gh.Burn; bu != nil && bu.Error == "" && bu.Ratio != nil {
		fl := o.Floor(gh.GPU.Name, results.FloorBurn)
		if fl > 0 {
			bu.Floor = ptr(fl)
			if *bu.Ratio < fl {
				flag(CheckFloor, "burn %s TFLOP/s sustained is %s of the %s TFLOP/s BF16 datasheet peak, under its %.2f floor: %s", compare.Num(bu.TFLOPS), ratio(*bu.Ratio, fl), compare.Num(*bu.Peak), fl, hint)
			}
		}
	}
}

// ratio writes r with two decimals, or three where two would read as the floor itself (0.596 < 0.60).
func ratio(r, floor float64) string {
	if s := fmt.Sprintf("%.2f", r); s != fmt.Sprintf("%.2f", floor) {
		return s
	}
	return fmt.Sprintf("%.3f", r)
}
