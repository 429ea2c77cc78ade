package gpu

import (
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuvet/gpuvet/internal/results"
)

// ErrorCounts are a GPU's error counters at one moment, read before and after a load so that what
// grew during it is known (issue 33). Nil: not read (Note says why).
type ErrorCounts struct {
	ECCCorrected, ECCUncorrected, PCIeReplays *int64
	XIDs                                      []results.XIDEvent
	Note                                      string
}

// Counter is a source that reads error counters (NVML, the simulator).
type Counter interface {
	Counts(i int) (ErrorCounts, error)
}

// Counts reads GPU i's volatile ECC totals, its PCIe replay counter and the XIDs seen since open.
func (s *nvmlSource) Counts(i int) (ErrorCounts, error) {
	d, err := s.device(i)
	if err != nil {
		return ErrorCounts{}, err
	}
	var c ErrorCounts
	var notes []string
	for _, x := range []struct {
		dst *(*int64)
		typ nvml.MemoryErrorType
	}{{&c.ECCCorrected, nvml.MEMORY_ERROR_TYPE_CORRECTED}, {&c.ECCUncorrected, nvml.MEMORY_ERROR_TYPE_UNCORRECTED}} {
		get(s, &notes, "nvmlDeviceGetTotalEccErrors", func() (uint64, nvml.Return) { return d.GetTotalEccErrors(x.typ, nvml.VOLATILE_ECC) },
			func(n uint64) { *x.dst = new(int64(n)) })
	}
	get(s, &notes, "nvmlDeviceGetPcieReplayCounter", d.GetPcieReplayCounter, func(n int) { c.PCIeReplays = new(int64(n)) })
	c.XIDs = s.xidsOf(i)
	c.Note = strings.Join(dedupe(notes), "; ")
	return c, nil
}
