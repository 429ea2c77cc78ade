package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"

	"github.com/gpuvet/gpuvet/internal/config"
)

// Fingerprint is a stable hash (the first 16 hex digits of a SHA-256) of the plan's
// measurement-relevant sections: the environment, the models, how the engine is launched, the
// load profile, the health phase's measurements and the per-accelerator overrides. Two runs with
// the same fingerprint measured the same things the same way, so their figures compare; the
// thresholds, outputs, backend reach (ssh, kubernetes) and the simulator's hardware settings are
// left out: they judge, write or stand for the hardware, they do not change what is measured
// (its slow-engine knobs are in: they stand for the engine).
func Fingerprint(c config.Config) string {
	e := c.Engine
	v := struct {
		Environment  string
		Models       []string
		Engine       []any
		Load         any
		Health       []any
		Functional   bool
		Power        bool
		Accelerators map[string]any
	}{
		Environment:  c.Environment,
		Models:       c.Models,
		Engine:       []any{e.Kind, e.Command, e.ExtraArgs, e.Version, e.TP, e.MaxModelLen, e.GPUMemoryUtilization, e.NUMABind, e.Env},
		Load:         c.LoadConfig(),
		Health:       []any{c.Health.Enabled, c.Health.GEMM, c.Health.PCIe, c.Health.Burn, c.Health.DCGM.Enabled, c.Health.DCGM.Level},
		Functional:   c.Functional.Enabled,
		Power:        c.Power.Enabled,
		Accelerators: map[string]any{},
	}
	// The simulator's slow-engine knobs are its engine, not its hardware: a slower simulated engine
	// measures another thing (added only when set, so the fingerprints of plans without them hold).
	if c.Sim.StepOverhead != 0 || c.Sim.SeqOverhead != 0 {
		v.Engine = append(v.Engine, "sim engine", c.Sim.StepOverhead, c.Sim.SeqOverhead)
	}
	// Its batch limit too, as a real engine's --max-num-seqs in extra_args is (the quick profile's
	// own, and none, add nothing, so the fingerprints of the plans before it hold).
	if n := c.Sim.MaxNumSeqs; n != 0 && n != config.SimQuickMaxNumSeqs {
		v.Engine = append(v.Engine, "sim engine batch", n)
	}
	if c.Sim.EngineDriftPct != 0 {
		v.Engine = append(v.Engine, "sim engine drift", c.Sim.EngineDriftPct)
	}
	for name, a := range c.Accelerators { // their models, engine and load; their gates judge
		if len(a.Models) > 0 || !reflect.ValueOf(a.Engine).IsZero() || !reflect.ValueOf(a.Load).IsZero() {
			v.Accelerators[name] = []any{a.Models, a.Engine, a.Load}
		}
	}
	// json.Marshal writes map keys sorted and struct fields in order: the same plan, the same bytes.
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
