package fleet

import (
	"fmt"
	"slices"

	"github.com/gpuvet/gpuvet/internal/results"
)

// NotVettedWhole says what a run left out of a host ("" when nothing): a GPU it found but served no
// engine on, or the health phase. Only a run that vetted the whole node, health included, as an
// acceptance run does, puts a node gpuvet took out of service back: an ok on two of eight GPUs
// says nothing of the other six.
func NotVettedWhole(h results.Host) string {
	var found []int
	for _, g := range h.Discovery.GPUs {
		found = append(found, g.Index)
	}
	if len(found) == 0 && h.Health != nil {
		for _, g := range h.Health.GPUs {
			found = append(found, g.GPU.Index)
		}
	}
	served := h.ServedGPUs()
	missing := 0
	for _, i := range found {
		if !slices.Contains(served, i) {
			missing++
		}
	}
	noHealth := h.Health == nil || h.Health.Status == results.StatusSkipped || h.Health.Status == ""
	switch {
	case len(found) == 0:
		return "no GPU was found on it"
	case missing > 0 && noHealth:
		return fmt.Sprintf("the run served %d of its %d GPUs and had no health phase", len(found)-missing, len(found))
	case missing > 0:
		return fmt.Sprintf("the run served %d of its %d GPUs", len(found)-missing, len(found))
	case noHealth:
		return "the run had no health phase"
	}
	return ""
}
