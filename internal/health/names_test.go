package health

import (
	"testing"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Every microbenchmark of the schema has a datasheet peak to be measured against.
func TestPeakOfEveryMicrobench(t *testing.T) {
	h200, _ := catalog.Builtin().LookupGPU("H200")
	for _, name := range results.MicrobenchNames() {
		if p := Peak(h200, name); p <= 0 {
			t.Errorf("%s: no peak on H200 (%v)", name, p)
		}
	}
}
