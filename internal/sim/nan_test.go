package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/catalog"
)

// A NaN from a flag (strconv.ParseFloat reads "NaN") passed every "< 0 || >= 100" check and made
// every simulated figure NaN; each is refused naming its field.
func TestNaNSettingsAreRefused(t *testing.T) {
	nan := math.NaN()
	fleet := func(c FleetConfig) error {
		c.GPU, c.Count, c.StragglerIndex = "H100", 2, -1
		_, err := NewFleet(c)
		return err
	}
	g, _ := catalog.Builtin().LookupGPU("H100")
	m, _ := catalog.Builtin().LookupModel("Qwen/Qwen3-8B")
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"straggler pct", fleet(FleetConfig{StragglerPct: nan})},
		{"node slowdown pct", fleet(FleetConfig{NodeSlowdownPct: nan})},
		{"engine drift pct", fleet(FleetConfig{EngineDriftPct: nan})},
		{"jitter", func() error { _, err := NewServer(Config{Model: "m", TTFT: 1, ITL: 1, Jitter: nan}); return err }()},
		{"fault-5xx", func() error {
			_, err := NewServer(Config{Model: "m", TTFT: 1, ITL: 1, Faults: Faults{Rate5xx: nan}})
			return err
		}()},
		{"gpu_memory_utilization", func() error { _, err := NewPerf(g, m, EngineConfig{GPUMemUtil: nan}); return err }()},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.name) {
			t.Errorf("%s = NaN: error %v, want one naming %q", tt.name, tt.err, tt.name)
		}
	}
}
