package judge

import (
	"github.com/gpuvet/gpuvet/internal/results"
)

// The thresholds table is results.Thresholds (its one home: config, judge and report read it);
// this file holds what the judge derives from it.

// HealthySOL is the share of the roofline bound (results.SpeedOfLight, at the profile's batch) a
// healthy engine of a kind reaches: the expected peak of a GPU × model with no reference entry is
// the bound × this share. Only kinds measured have one; a GPU served by another, with no reference
// and no peer, has its throughput not judged (inconclusive, and the run says so).
func HealthySOL(engineKind, version string) (pct float64, where string, ok bool) {
	if engineKind == "sim" && version == "gpuvet-sim" { // the simulator's own engine, not a slow one it plays
		pct = results.DefaultOf(results.ThHealthySOLSim)
		return pct, "the simulator's measured healthy " + fmtNum(pct) + " %", true
	}
	return 0, "", false
}
