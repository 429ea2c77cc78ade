package judge

import (
	"fmt"
	"sort"

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
		return results.DefaultOf(results.ThHealthySOLSim), "the simulator's measured healthy " + fmtNum(results.DefaultOf(results.ThHealthySOLSim)) + " %", true
	}
	return 0, "", false
}

// ThresholdTable writes the table as text lines (`gpuvet config show` and the docs can print it).
func ThresholdTable() []string {
	rows := append([]results.ThresholdSpec(nil), results.Thresholds...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Source < rows[j].Source })
	var out []string
	for _, t := range rows {
		d := fmtNum(t.Default)
		if t.Key == results.ThFloors {
			d = fmt.Sprint(results.MicrobenchFloors())
		}
		out = append(out, fmt.Sprintf("%-32s %-10s %-14s %-9s %s", t.Key, d, t.Unit, t.Source, t.Where))
	}
	return out
}
