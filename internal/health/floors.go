package health

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuvet/gpuvet/internal/busy"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

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
