package term

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/fleetview"
	"github.com/gpuvet/gpuvet/internal/results"
)

// A fleet of more than FleetTableHosts hosts gets a compact block instead of one row per endpoint:
// counts by status, the worst nodes ranked with their reasons, the rest counted, and capped
// caveats. 1,000 nodes × 8 GPUs read like 10; report.html and summary.json hold every node.
const (
	FleetTableHosts = 4  // at most this many hosts: the per-endpoint table, as for one host
	fleetWorstMin   = 5  // worst nodes listed: every node that is not ok, at least this many…
	fleetWorstMax   = 20 // …and at most this many
	fleetMaxLines   = 12 // lines per block (caveats, host preparation) before "N more"
	fleetMaxNames   = 4  // GPUs or hosts named on one caveat line before "and N more"
	fleetReasons    = 3  // reasons printed per listed node before "+N more"
)

// Compact reports whether s is printed as a compact fleet block (more than FleetTableHosts hosts).
func Compact(s *results.Summary) bool {
	return s != nil && len(s.Hosts) > FleetTableHosts
}

// fleetSummary is Summary for a large fleet.
func fleetSummary(w io.Writer, s *results.Summary) {
	v := fleetview.Ranked(s)
	fmt.Fprintf(w, "Fleet: %s nodes, %s GPUs: %s\n", Count(len(v.Nodes)), Count(v.GPUs), statusCounts(v.Nodes))
	if v.Median > 0 {
		lo, hi := fleetview.Spread(v.Nodes)
		fmt.Fprintf(w, "%s %s per GPU: fleet median %.0f; nodes from %s to %s of it\n", v.Model, fleetview.FigureName, v.Median, Pct(lo), Pct(hi))
	}
	shown := v.Listed(fleetWorstMin, fleetWorstMax)
	fmt.Fprintf(w, "\nWorst nodes (%d of %s, worst first; every node: report.html and summary.json)\n", shown, Count(len(v.Nodes)))
	t := NewTable(w, "#", "NODE", "STATUS", "GPUS", "PEAK tok/s", "VS MEDIAN")
	var why []string
	for i, n := range v.Nodes[:shown] {
		fig, delta := "", ""
		if n.HasValue() {
			fig, delta = fmt.Sprintf("%.0f", n.Value), Pct(n.DeltaPct)
		}
		t.Row(fmt.Sprint(i+1), n.Name, string(n.Status), strings.Join(n.GPUCounts(), ", "), fig, delta)
		for j, r := range n.Reasons[:min(len(n.Reasons), fleetReasons)] {
			if j == fleetReasons-1 && len(n.Reasons) > fleetReasons {
				r += fmt.Sprintf(" (+%d more: report.html)", len(n.Reasons)-fleetReasons)
			}
			why = append(why, n.Name+": "+r)
		}
	}
	t.Flush()
	if rest := v.Nodes[shown:]; len(rest) > 0 {
		line := fmt.Sprintf("The other %s nodes: %s", Count(len(rest)), statusCounts(rest))
		if lo, hi := fleetview.Spread(rest); v.Median > 0 && (lo != 0 || hi != 0) {
			line += fmt.Sprintf(", from %s to %s of the median", Pct(lo), Pct(hi))
		}
		fmt.Fprintln(w, line+".")
	}
	Block(w, "Why", why)
	Block(w, "Run flags and failures", capLines(runFlagLines(s), "flags"))
	Block(w, "Caveats", capLines(fleetCaveats(s), "caveats"))
	Block(w, "Host preparation", capLines(fleetPrep(s), "hosts"))
	Block(w, "Time to vet", fleetTiming(s))
	Block(w, "Detection power", fleetDetection(s))
}

// runFlagLines are the run's own flags (a baseline breach, the engine version) and error: the
// nodes' own are in the Why block.
func runFlagLines(s *results.Summary) []string {
	var out []string
	if s.Error != "" {
		out = append(out, "[failed] run: "+errorLine(s.Error))
	}
	for _, f := range s.Flags {
		if f.Scope == "run" {
			out = append(out, flagLine(f))
		}
	}
	return out
}

// statusCounts is nodes by status, worst first: "985 ok, 5 flag" ordered as the ranking.
func statusCounts(nodes []fleetview.Node) string {
	v := fleetview.View{Nodes: nodes}
	var parts []string
	for _, c := range v.Counts() {
		parts = append(parts, fmt.Sprintf("%s %s", Count(c.N), c.Status))
	}
	return strings.Join(parts, ", ")
}

// fleetCaveats are caveatLines with each GPU list capped, and the run's caveats that repeat per host
// ("node-1: DCGM was skipped …") said once with the hosts counted.
func fleetCaveats(s *results.Summary) []string {
	out := caveatLines(&results.Summary{Hosts: s.Hosts, Fleet: s.Fleet}, fleetMaxNames)
	order, by := fleetview.ByHost(s, s.Caveats)
	for _, what := range order {
		if who := by[what]; len(who) > 0 {
			out = append(out, Names(who, fleetMaxNames)+": "+what)
		} else {
			out = append(out, what)
		}
	}
	return out
}

// Names lists up to n names, then how many more: "a, b, c, d and 996 more".
func Names(all []string, n int) string {
	if n <= 0 || len(all) <= n {
		return strings.Join(all, ", ")
	}
	return strings.Join(all[:n], ", ") + fmt.Sprintf(" and %s more", Count(len(all)-n))
}

// fleetPrep is the host-preparation block of a large fleet: only the hosts where it went wrong
// (not prepared, something left, vfio not restored), the others counted.
func fleetPrep(s *results.Summary) []string {
	var out []string
	fine := 0
	for _, h := range s.Hosts {
		p := h.Prep
		if p == nil {
			continue
		}
		if p.Error == "" && len(p.Left) == 0 && p.RestoreError == "" {
			fine++
			continue
		}
		out = append(out, prepLines(&results.Summary{Hosts: []results.Host{h}})...)
	}
	if fine > 0 {
		out = append(out, fmt.Sprintf("%s hosts prepared and restored, nothing left", Count(fine)))
	}
	return out
}

// fleetTiming is the run's total and how the hosts' own wall times spread.
func fleetTiming(s *results.Summary) []string {
	var out []string
	if t := s.Timing; t != nil && len(t.Phases) > 0 {
		out = append(out, "total "+fleetview.Seconds(t.TotalSeconds)+": "+phaseList(t.Phases))
	}
	var total []float64
	for _, h := range s.Hosts {
		var slowest float64
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				if e.Timing != nil {
					slowest = math.Max(slowest, e.Timing.TotalSeconds)
				}
			}
		}
		if slowest > 0 {
			total = append(total, slowest)
		}
	}
	if len(total) > 0 {
		out = append(out, fmt.Sprintf("slowest engine per node: %s to %s over %s nodes (each engine's time: summary.json)", fleetview.Seconds(slices.Min(total)), fleetview.Seconds(slices.Max(total)), Count(len(total))))
	}
	return out
}

// fleetDetection keeps the node-to-node and baseline lines of the detection block (the per-host
// GPU-to-GPU lines are in the report).
func fleetDetection(s *results.Summary) []string {
	return detectionLines(&results.Summary{Fleet: s.Fleet, Baseline: s.Baseline})
}

// capLines keeps the first fleetMaxLines lines and says how many more there are.
func capLines(lines []string, what string) []string {
	if len(lines) <= fleetMaxLines {
		return lines
	}
	return append(lines[:fleetMaxLines:fleetMaxLines], fmt.Sprintf("… and %s more %s (summary.json, report.html)", Count(len(lines)-fleetMaxLines), what))
}

// Count writes a count with thousands separators: 7,992.
func Count(n int) string { return fleetview.Thousands(fmt.Sprint(n)) }

// Pct writes a signed percentage: "-15.2 %", "+1.9 %".
func Pct(v float64) string { return fmt.Sprintf("%+.1f %%", v) }
