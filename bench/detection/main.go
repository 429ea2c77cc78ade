// Command detection measures gpuvet's detection power on the simulator (issue 35): it runs
// `gpuvet run --sim --sim-straggler 2 --set sim.straggler_pct=P` and a plain `gpuvet run --sim` N
// times each, reads every summary.json, and prints how often the straggler (and only it) was
// flagged, how often the healthy run flagged anything, each run's status, the machine's load
// average around it, and the detectable slowdown each run stated per metric.
//
//	go build -o /tmp/gpuvet ./cmd/gpuvet && go run ./bench/detection -gpuvet /tmp/gpuvet -n 10
//
// Target: the straggler flagged, alone, in N of N runs; the healthy run flagging nothing in N of N.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

func main() {
	bin := flag.String("gpuvet", "gpuvet", "the gpuvet binary")
	n := flag.Int("n", 10, "runs of each kind")
	pct := flag.Float64("pct", 10, "how much slower the straggler is (sim.straggler_pct)")
	straggler := flag.Int("straggler", 2, "the straggler GPU")
	out := flag.String("out", "", "folder for the runs' outputs (default: a temporary folder)")
	flag.Parse()
	dir := *out
	if dir == "" {
		d, err := os.MkdirTemp("", "gpuvet-detection-")
		if err != nil {
			fail(err)
		}
		dir = d
	}
	fmt.Printf("gpuvet detection power: %d runs each, straggler gpu %d at %g %%, %d CPUs, outputs in %s\n", *n, *straggler, *pct, runtime.NumCPU(), dir)
	caught, clean := 0, 0
	for i := range *n {
		s, load, took := run(*bin, filepath.Join(dir, fmt.Sprintf("straggler-%d", i)),
			"--sim-straggler", fmt.Sprint(*straggler), "--set", fmt.Sprintf("sim.straggler_pct=%g", *pct))
		fl := flaggedGPUs(s)
		ok := len(fl) == 1 && fl[0] == *straggler
		if ok {
			caught++
		}
		fmt.Printf("straggler run %2d: status %-12s flagged gpus %-8v %s  load %s  %.0f s  by %s\n", i+1, s.Status, fl, mark(ok), load, took, byMetric(s, *straggler))
		fmt.Printf("                  detectable: %s\n", detectable(s))
	}
	for i := range *n {
		s, load, took := run(*bin, filepath.Join(dir, fmt.Sprintf("healthy-%d", i)))
		fl := flaggedGPUs(s)
		ok := len(fl) == 0 && len(s.Flags) == 0
		if ok {
			clean++
		}
		fmt.Printf("healthy run   %2d: status %-12s flagged gpus %-8v %s  load %s  %.0f s\n", i+1, s.Status, fl, mark(ok), load, took)
		fmt.Printf("                  detectable: %s\n", detectable(s))
	}
	fmt.Printf("\nstraggler gpu %d (%g %% slower) flagged, and only it: %d of %d runs\n", *straggler, *pct, caught, *n)
	fmt.Printf("healthy run flagged nothing: %d of %d runs\n", clean, *n)
	if caught != *n || clean != *n {
		os.Exit(1)
	}
}

// run runs gpuvet once into out and reads its summary; load is the 1-minute load average before
// and after (other work on the machine makes the client-limited guard hold figures back).
func run(bin, out string, args ...string) (*results.Summary, string, float64) {
	before := loadavg()
	t0 := time.Now()
	cmd := exec.Command(bin, append([]string{"run", "--sim", "--force", "--out", out}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			fail(fmt.Errorf("%s: %w\n%s", bin, err, b))
		}
	}
	took := time.Since(t0).Seconds()
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		fail(err)
	}
	var s results.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		fail(fmt.Errorf("%s: %w", out, err))
	}
	return &s, before + "→" + loadavg(), took
}

// flaggedGPUs are the GPUs with any flag: on an endpoint or from the health phase.
func flaggedGPUs(s *results.Summary) []int {
	set := map[int]bool{}
	for _, h := range s.Hosts {
		if h.Health != nil {
			for _, g := range h.Health.GPUs {
				if len(g.Flags) > 0 {
					set[g.GPU.Index] = true
				}
			}
		}
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				if len(e.Flags) > 0 {
					for _, g := range e.GPUs {
						set[g] = true
					}
				}
			}
		}
	}
	var out []int
	for g := range set {
		out = append(out, g)
	}
	sort.Ints(out)
	return out
}

// byMetric names the comparisons that flagged gpu.
func byMetric(s *results.Summary, gpu int) string {
	var out []string
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, c := range m.Comparisons {
				for _, v := range c.Values {
					if v.GPU == gpu && v.Flagged {
						out = append(out, fmt.Sprintf("%s %+.1f %% [%.1f, %.1f]", c.Metric, v.DeltaPct, v.DeltaCI.Lo, v.DeltaCI.Hi))
					}
				}
			}
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "; ")
}

func detectable(s *results.Summary) string {
	var out []string
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, c := range m.Comparisons {
				d := "-"
				if c.DetectablePct > 0 {
					d = fmt.Sprintf("%.1f %%", c.DetectablePct)
				}
				out = append(out, c.Metric+" "+d)
			}
		}
	}
	return strings.Join(out, ", ")
}

func mark(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO "
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "detection:", err)
	os.Exit(2)
}
