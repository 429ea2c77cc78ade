package history

import (
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
)

// The simulated engine's batch limit (sim.max_num_seqs) is part of what is measured, as a real
// engine's --max-num-seqs in engine.extra_args is: plans that differ in it do not share an
// acceptance. Before, they had one fingerprint, and a node was compared with its acceptance
// measured at another batch limit (a false drift, or a real one hidden). The quick profile's own
// batch keeps the fingerprint it had.
func TestFingerprintCarriesTheSimulatedBatchLimit(t *testing.T) {
	plan := func(sets ...string) string {
		p, err := config.Load(config.Options{Sets: append([]string{"backend=sim"}, sets...)})
		if err != nil {
			t.Fatal(err)
		}
		return Fingerprint(p.Config)
	}
	quick := plan()
	if plan("sim.max_num_seqs=256") == quick || plan("sim.max_num_seqs=8") == quick {
		t.Error("a different sim.max_num_seqs kept the fingerprint")
	}
	if plan("sim.max_num_seqs=256") == plan("sim.max_num_seqs=8") {
		t.Error("two batch limits share one fingerprint")
	}
	if Fingerprint(config.Defaults()) != Fingerprint(func() config.Config { c := config.Defaults(); c.Sim.MaxNumSeqs = 0; return c }()) {
		t.Error("a plan without the simulator's batch limit changed its fingerprint")
	}
}
