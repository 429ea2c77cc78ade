package sim

import (
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Every microbenchmark of the schema is simulated: a new name in results fails here until the
// simulator gives it a figure.
func TestFleetSimulatesEveryMicrobench(t *testing.T) {
	f, err := NewFleet(FleetConfig{GPU: "H200", Count: 1, StragglerIndex: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range results.MicrobenchNames() {
		if v, unit, err := f.Microbench(0, name); err != nil || v <= 0 || unit == "" {
			t.Errorf("%s: %v %q %v", name, v, unit, err)
		}
	}
}
