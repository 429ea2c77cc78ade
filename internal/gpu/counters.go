package gpu

import (
	"fmt"
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
	if i < 0 || i >= len(s.devices) {
		return ErrorCounts{}, fmt.Errorf("GPU %d: no such GPU (NVML sees %d)", i, len(s.devices))
	}
	d := s.devices[i]
	var c ErrorCounts
	var notes []string
	for _, x := range []struct {
		dst *(*int64)
		typ nvml.MemoryErrorType
	}{{&c.ECCCorrected, nvml.MEMORY_ERROR_TYPE_CORRECTED}, {&c.ECCUncorrected, nvml.MEMORY_ERROR_TYPE_UNCORRECTED}} {
		s.call(&notes, "nvmlDeviceGetTotalEccErrors", func() nvml.Return {
			n, r := d.GetTotalEccErrors(x.typ, nvml.VOLATILE_ECC)
			if r == nvml.SUCCESS {
				*x.dst = ptr(int64(n))
			}
			return r
		})
	}
	s.call(&notes, "nvmlDeviceGetPcieReplayCounter", func() nvml.Return {
		n, r := d.GetPcieReplayCounter()
		if r == nvml.SUCCESS {
			c.PCIeReplays = ptr(int64(n))
		}
		return r
	})
	c.XIDs = s.xidsOf(i)
	c.Note = strings.Join(dedupe(notes), "; ")
	return c, nil
}
