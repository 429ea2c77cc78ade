package pipeline

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
	"github.com/gpuvet/gpuvet/internal/testwait"
)

// TestMain lets the test binary play a CPU hog when asked (GPUVET_TEST_HOG=1): a child process
// spinning on one core, the way other work loads a shared build machine.
func TestMain(m *testing.M) {
	if os.Getenv("GPUVET_TEST_HOG") == "1" {
		// Spinning is the point; it ends with the test binary that started it, also when that one
		// was killed before its cleanup (an orphaned pair once held a machine's two cores for hours).
		parent := os.Getppid()
		for os.Getppid() == parent {
			for i := 0; i < 50_000_000; i++ {
			}
		}
		os.Exit(0)
	}
	// Its slow tests wait on simulated engines' clocks (TestHistoryOfADriftingEngine: 122 s for 12
	// CPU-s; TestSlowEngineDefaultProfileIsNeverJudgedOnATransient: 80 s for 3), so four run at
	// once; the hog test is not parallel, so it runs before them, beside none of them.
	testwait.Parallel(4)
	os.Exit(withStateDir(m))
}

// withStateDir runs the tests with gpuvet's state (run manifests, the history database) in a
// folder of their own, unless the caller chose one: a test's runs never land in the user's history.
func withStateDir(m *testing.M) int {
	if os.Getenv("GPUVET_STATE_DIR") != "" {
		return m.Run()
	}
	d, err := os.MkdirTemp("", "gpuvet-test-state-")
	if err != nil {
		return m.Run()
	}
	defer os.RemoveAll(d)
	os.Setenv("GPUVET_STATE_DIR", d)
	return m.Run()
}

// hog starts one spinning child process per core and stops them when the test ends.
func hog(t *testing.T) {
	t.Helper()
	for i := 0; i < runtime.NumCPU(); i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "GPUVET_TEST_HOG=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
}

// `gpuvet run --sim` on a loaded machine must end ok, never flagged or failed: a figure the loaded
// client could not measure well (client-limited, too few samples, a lower bound) is inconclusive,
// never a flag, and a run is inconclusive only where its client set the pace.
// The run is the README's (four virtual H200s loaded in parallel, the real load generator, health,
// functional suite, judge) with a CPU hog on every core beside it, four times (16 GPUs, each
// compared with three peers in every figure). Only the load profile is shorter (2 s per rung, 2
// rates, 64 output tokens): the verdict logic is the same, and shorter windows mean fewer samples
// and noisier figures, which is harder for it, not easier. It was ten runs: 277 s beside
// cmd/gpuvet here (2026-12-05), the slowest test of internal/pipeline, with the hog taking both
// cores from every test beside it all that time; four keep the contract's check on 16 loaded GPUs
// at two fifths of the cost. The rule's power on figures of a known spread is held by compare's
// deterministic tests, not by repeating this one.
func TestSimRunIsOKBesideACPUHog(t *testing.T) {
	const runs = 4
	if testing.Short() {
		t.Skip("simulator runs beside a CPU hog")
	}
	hog(t)
	clientBound, undecided := 0, 0
	for i := 0; i < runs; i++ {
		// Four at once, as auto chooses on two quiet cores (a hog beside it may make auto choose
		// fewer, which would make the test easier).
		// 64 output tokens: a request's ITL p95 over 31 gaps is its second-largest, a near-maximum
		// that a hog's scheduling jitter moves by itself; over 63 it is a percentile again.
		p := quick(t, "sim.gpus=4", "load.max_duration=2s", "load.max_concurrency=16", "load.output_tokens=64", "run.parallel_gpus=4")
		res, err := Run(context.Background(), p, NewDeps(p.Config, nil, nil), Options{Host: "h"})
		if err != nil {
			t.Fatal(err)
		}
		if why := notOKBesideHog(res.Summary); why != "" || res.ExitCode != 0 {
			var sb strings.Builder
			term.Summary(&sb, res.Summary)
			t.Fatalf("run %d/%d: status %s, exit %d, want ok (%s):\n%s", i+1, runs, res.Summary.Status, res.ExitCode, why, sb.String())
		}
		if res.Summary.Status != results.StatusOK {
			clientBound++
			noise := false
			for _, g := range res.Summary.Hosts[0].GPUs { // what left it undecided, for whoever reads a failure
				for _, w := range g.Why {
					t.Logf("run %d gpu %d: %s", i+1, g.Index, w)
					noise = noise || !strings.Contains(w, "client-limited")
				}
			}
			if noise {
				undecided++
			}
		}
	}
	// How often a healthy run is left undecided by its figures' own spread depends on how busy the
	// machine is beside the hog (1 of 10 runs with the hog alone on two cores, 8 of 10 with three more
	// spinning processes, each saying how many requests would decide it): it is the machine's noise,
	// not the rule's, so it is reported, not bounded here. The rule's power on figures of a known
	// spread is held by compare's TestPeersNoiseIsAPass and TestPeersWithinMarginUndecided.
	t.Logf("%d of %d runs inconclusive (%d for their figures' spread, the rest because their client set the pace), the others ok", clientBound, runs, undecided)
}

// notOKBesideHog says what is wrong with a run beside a CPU hog ("" when nothing is): it must be
// ok, or inconclusive only where the load left a figure undecided and says what would decide it
// (the load generator was the bottleneck, or an interval reaches past its limit or margin: issue
// 42, undecided is never ok): a flag, a failure or an inconclusive figure for another reason is
// wrong.
func notOKBesideHog(s *results.Summary) string {
	if s.Status == results.StatusOK {
		return ""
	}
	if s.Status != results.StatusInconclusive {
		return "status " + string(s.Status)
	}
	loadNoise := func(reason string) bool {
		return strings.Contains(reason, "client-limited") || strings.Contains(reason, "reaches past the") || strings.Contains(reason, "spans the limit") ||
			strings.Contains(reason, "gets one only from enough requests") || // a tail percentile of 30 requests has no interval
			strings.Contains(reason, compare.CPUWaitFix) // the hog starved the engine
	}
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				if e.Status != results.StatusOK && e.Status != results.StatusInconclusive {
					return fmt.Sprintf("gpu %v is %s", e.GPUs, e.Status)
				}
				for _, v := range e.Verdicts {
					if v.Result == "inconclusive" && !loadNoise(v.Reason) {
						return fmt.Sprintf("gpu %v: %s inconclusive: %s", e.GPUs, v.Check, v.Reason)
					}
				}
			}
			for _, c := range m.Comparisons {
				if c.LowConfidence {
					return "GPU-to-GPU " + c.Metric + " low confidence: " + c.Note
				}
				for _, v := range c.Values {
					if v.Inconclusive && !loadNoise(v.Reason) {
						return fmt.Sprintf("GPU-to-GPU %s on gpu %d inconclusive: %s", c.Metric, v.GPU, v.Reason)
					}
				}
			}
		}
	}
	return ""
}
