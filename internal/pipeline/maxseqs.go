package pipeline

import (
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// maxNumSeqs is the engine's max_num_seqs as the plan gives it: the simulator's, or --max-num-seqs
// among the engine's extra arguments; 0 when the plan does not say (the load's knee search then stops
// on its own bound).
func maxNumSeqs(cfg config.Config) int {
	if backendkind.Of(cfg.Backend).Simulated {
		if cfg.Sim.MaxNumSeqs > 0 {
			return cfg.Sim.MaxNumSeqs
		}
		return sim.DefaultEngineConfig().MaxNumSeqs
	}
	args := cfg.Engine.ExtraArgs
	for i, a := range args {
		v, ok := strings.CutPrefix(a, "--max-num-seqs=")
		if !ok && a == "--max-num-seqs" && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if n, err := strconv.Atoi(v); ok && err == nil && n > 0 {
			return n
		}
	}
	return 0
}
