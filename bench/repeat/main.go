// Command repeat measures whether the same simulated GPUs give the same figures twice when their
// engine drifts (issue 55): it runs N pairs of `gpuvet run --sim` with sim.engine_drift_pct, reads
// both summaries of each pair, and prints, per gated figure of the synchronous rung, whether the two
// runs' intervals across runs (repeat.ci, Run.AcrossRuns) overlap, and whether both runs ended in
// the same verdict; then M runs with a straggler 10 % slow under the same drift, and how often it
// (and only it) was flagged.
//
//	go build -o /tmp/gpuvet ./cmd/gpuvet && go run ./bench/repeat -gpuvet /tmp/gpuvet -pairs 10 -stragglers 3
//
// Target: every figure's intervals overlap and the verdicts agree in N of N pairs; the straggler
// caught alone in M of M.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// figures are the synchronous rung's gated figures whose intervals a rerun is judged by.
var figures = []string{"ttft_p95_ms", "itl_p95_ms", "tpot_p50_ms", "output_tok_s"}

func main() {
	bin := flag.String("gpuvet", "gpuvet", "the gpuvet binary")
	pairs := flag.Int("pairs", 10, "pairs of runs of the same GPUs")
	stragglers := flag.Int("stragglers", 3, "runs with a straggler")
	drift := flag.Float64("drift", 25, "sim.engine_drift_pct")
	gpus := flag.Int("gpus", 2, "simulated GPUs")
	out := flag.String("out", "", "folder for the runs' outputs (default: a temporary folder)")
	flag.Parse()
	dir := *out
	if dir == "" {
		d, err := os.MkdirTemp("", "gpuvet-repeat-")
		if err != nil {
			fail(err)
		}
		dir = d
	}
	base := []string{"--sim-gpus", fmt.Sprint(*gpus), "--set", fmt.Sprintf("sim.engine_drift_pct=%g", *drift),
		"--set", "history.enabled=false", "--set", "load.rates=5"}
	fmt.Printf("gpuvet repeat: %d pairs, %d straggler runs, %d GPUs, engine drift %g %%, %d CPUs, outputs in %s\n",
		*pairs, *stragglers, *gpus, *drift, runtime.NumCPU(), dir)
	overlap, none := map[string]int{}, map[string]int{}
	same := 0
	for i := range *pairs {
		a, ta := run(*bin, filepath.Join(dir, fmt.Sprintf("pair-%d-a", i)), base...)
		b, tb := run(*bin, filepath.Join(dir, fmt.Sprintf("pair-%d-b", i)), base...)
		var cells []string
		for _, f := range figures {
			ok, missing, text := overlaps(a, b, f)
			switch {
			case ok:
				overlap[f]++
			case missing:
				none[f]++
			}
			cells = append(cells, text)
		}
		if a.Status == b.Status {
			same++
		}
		fmt.Printf("pair %d: %s (%.0f s), %s (%.0f s); %s\n", i+1, a.Status, ta.Seconds(), b.Status, tb.Seconds(), strings.Join(cells, "; "))
	}
	caught := 0
	for i := range *stragglers {
		s, took := run(*bin, filepath.Join(dir, fmt.Sprintf("straggler-%d", i)),
			append(base, "--sim-straggler", "1", "--set", "sim.straggler_pct=10")...)
		fl := flagged(s)
		if len(fl) == 1 && fl[0] == 1 {
			caught++
		}
		fmt.Printf("straggler run %d: %s, flagged GPUs %v (%.0f s)\n", i+1, s.Status, fl, took.Seconds())
	}
	fmt.Println()
	for _, f := range figures {
		fmt.Printf("%s: intervals overlap in %d of %d pairs", f, overlap[f], *pairs)
		if none[f] > 0 {
			fmt.Printf(", %d with %s in a run (a tail of too few requests: its gate judges the value)", none[f], noInterval)
		}
		fmt.Println()
	}
	fmt.Printf("same verdict in %d of %d pairs; straggler caught alone in %d of %d runs\n", same, *pairs, caught, *stragglers)
}

// noInterval says a run's figure had no interval.
const noInterval = "no interval"

// overlaps says whether the two runs' intervals across runs of figure f (the first endpoint's
// synchronous rung) overlap, or a run had none (missing), and shows them.
func overlaps(a, b *results.Summary, f string) (ok, missing bool, text string) {
	ia, ib := syncRun(a).AcrossRuns(f), syncRun(b).AcrossRuns(f)
	if ia == nil || ib == nil {
		return false, true, fmt.Sprintf("%s %s (%.4g, %.4g)", f, noInterval, value(a, f), value(b, f))
	}
	ok = ia.Hi >= ib.Lo && ib.Hi >= ia.Lo
	return ok, false, fmt.Sprintf("%s [%.4g, %.4g] [%.4g, %.4g]%s", f, ia.Lo, ia.Hi, ib.Lo, ib.Hi, map[bool]string{true: "", false: " APART"}[ok])
}

// value is figure f of a summary's synchronous rung.
func value(s *results.Summary, f string) float64 {
	r := syncRun(s)
	switch f {
	case "ttft_p95_ms":
		return r.TTFT.P95
	case "itl_p95_ms":
		return r.ITL.P95
	case "tpot_p50_ms":
		return r.TPOT.P50
	}
	return r.OutputTokS
}

func syncRun(s *results.Summary) *results.Run {
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				if e.Load != nil && len(e.Load.Runs) > 0 && e.Load.Runs[0].Kind == "synchronous" {
					return &e.Load.Runs[0]
				}
			}
		}
	}
	return &results.Run{}
}

// flagged are the GPUs whose verdict is flag or failed.
func flagged(s *results.Summary) []int {
	var out []int
	for _, h := range s.Hosts {
		for _, g := range h.GPUs {
			if g.Status == results.StatusFlag || g.Status == results.StatusFailed {
				out = append(out, g.Index)
			}
		}
	}
	return out
}

func run(bin, out string, args ...string) (*results.Summary, time.Duration) {
	start := time.Now()
	cmd := exec.Command(bin, append([]string{"run", "--sim", "--out", out}, args...)...)
	cmd.Stdout, cmd.Stderr = nil, nil
	_ = cmd.Run() // a flag or an inconclusive run exits 0 or 1; the summary says which
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		fail(err)
	}
	return s, time.Since(start)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "repeat:", err)
	os.Exit(1)
}
