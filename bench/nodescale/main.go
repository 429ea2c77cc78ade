// Command nodescale measures the time to vet a whole simulated node (issue 34): `gpuvet run --sim`
// with the seed's full load profile (sweep, 512/256 tokens, max concurrency 128, 10 rates of 20 s,
// the engine's batch of 256) and the health phase in real time (each simulated benchmark takes
// -bench-time), one GPU at a time (serial) against run.parallel_gpus auto. For each mode it prints
// the wall time per phase, the process's CPU (the load generator and the in-process simulators),
// the client's worst lag, whether every sweep saturated and how many rungs were client-limited.
//
//	go run ./bench/nodescale -gpus 8                       # the full profile: about 4 min auto, 25 min serial
//	go run ./bench/nodescale -gpus 8 -serial-gpus 1         # serial measured on 1 GPU, stated as 8 × that
//	go run ./bench/nodescale -gpus 4 -set load.max_duration=4s -set load.rates=4   # a smaller scale
//
// -serial-gpus k measures the serial run's models phase on the first k GPUs only (health still on
// all of them) and states the serial total as health + gpus/k × that phase, marked "estimated".
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleetview"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/results"
)

// fullProfile is the seed's shared load profile on the simulator: the five load keys the simulator
// shortens set back to the seed's values, and vLLM's default batch.
var fullProfile = []string{"load.prompt_tokens=512", "load.output_tokens=256", "load.max_duration=20s", "load.rates=10",
	"load.max_concurrency=128", "sim.max_num_seqs=256"}

type sets []string

func (s *sets) String() string     { return strings.Join(*s, " ") }
func (s *sets) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	gpus := flag.Int("gpus", 8, "simulated GPUs (--sim-gpus)")
	modes := flag.String("modes", "serial,auto", "runs, in order: serial (run.parallel_gpus=1), auto, or a count")
	serialGPUs := flag.Int("serial-gpus", 0, "serial only: measure the models phase on this many GPUs and scale it to -gpus (0: all)")
	benchTime := flag.Duration("bench-time", 2*time.Second, "how long each simulated microbenchmark and peer copy takes (sim.bench_time)")
	out := flag.String("out", "", "folder for each run's output (default: a temporary folder, removed)")
	verbose := flag.Bool("v", false, "show each run's progress")
	var extra sets
	flag.Var(&extra, "set", "key=value over the full profile (repeatable), e.g. load.max_duration=4s")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir := *out
	if dir == "" {
		d, err := os.MkdirTemp("", "gpuvet-nodescale-*")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	base := append(append([]string{"backend=sim", fmt.Sprintf("sim.gpus=%d", *gpus), "sim.bench_time=" + benchTime.String()}, fullProfile...), extra...)
	fmt.Printf("gpuvet run --sim --sim-gpus %d, profile: %s, sim.bench_time=%s\n", *gpus, strings.Join(append(fullProfile[:len(fullProfile):len(fullProfile)], extra...), " "), benchTime)
	fmt.Printf("%-7s %-7s %-9s %9s %9s %11s %10s %9s %10s %11s  %s\n", "MODE", "AT ONCE", "MEASURED", "HEALTH", "MODELS", "TIME TO VET", "CPU cores", "LAG p99", "SATURATED", "CLIENT-LIM", "STATUS")
	var reasons []string
	for _, mode := range strings.Split(*modes, ",") {
		mode = strings.TrimSpace(mode)
		par := mode
		if mode == "serial" {
			par = "1"
		}
		s := append(sets{}, base...)
		s = append(s, "run.parallel_gpus="+par, "output.dir="+dir+"/"+mode)
		k := *gpus
		if mode == "serial" && *serialGPUs > 0 && *serialGPUs < *gpus {
			k = *serialGPUs
			s = append(s, fmt.Sprintf("run.gpu_count=%d", k))
		}
		r, err := runOnce(ctx, s, *verbose)
		if err != nil {
			fail(fmt.Errorf("%s: %w", mode, err))
		}
		r.print(mode, k, *gpus)
		if c := r.sum.Meta.Parallel; c != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %s", mode, c.Reason))
		}
		if ctx.Err() != nil {
			break
		}
	}
	for _, l := range reasons {
		fmt.Println(l)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "nodescale:", err)
	os.Exit(1)
}

// result is one run: its summary, wall time and the process's CPU over it.
type result struct {
	sum  *results.Summary
	wall time.Duration
	cpu  time.Duration
}

func runOnce(ctx context.Context, s []string, verbose bool) (*result, error) {
	plan, err := config.Load(config.Options{Sets: s})
	if err != nil {
		return nil, err
	}
	var progress io.Writer
	if verbose {
		progress = os.Stderr
	}
	c0, t0 := cpuTime(), time.Now()
	res, err := pipeline.Run(ctx, plan, pipeline.NewDeps(plan.Config, nil, progress), pipeline.Options{ToolVersion: "bench", Host: "bench", Progress: progress})
	if err != nil {
		return nil, err
	}
	return &result{sum: res.Summary, wall: time.Since(t0), cpu: cpuTime() - c0}, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func phase(s *results.Summary, name string) float64 {
	if s.Timing == nil {
		return 0
	}
	for _, p := range s.Timing.Phases {
		if p.Phase == name {
			return p.Seconds
		}
	}
	return 0
}

// print writes one row: measured on k of n GPUs; with k < n the models phase and the total are
// scaled by n/k and marked "(est.)".
func (r *result) print(mode string, k, n int) {
	s := r.sum
	health, models := phase(s, "health"), phase(s, "models")
	total := r.wall.Seconds()
	est := ""
	if k < n {
		total += models * float64(n-k) / float64(k)
		models *= float64(n) / float64(k)
		est = " (est.)"
	}
	lag, sat, sweeps, limited, rungs := 0.0, 0, 0, 0, 0
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				if e.Load == nil {
					continue
				}
				lag = max(lag, e.Load.Client.LagP99Ms)
				sweeps++
				if e.Load.Saturation != nil && !e.Load.Saturation.LowerBound() {
					sat++
				}
				for _, run := range e.Load.Runs {
					rungs++
					if run.ClientLimited {
						limited++
					}
				}
			}
		}
	}
	atOnce := fmt.Sprint(s.Meta.ParallelGPUs)
	fmt.Printf("%-7s %-7s %-9s %9s %9s %11s %10.2f %6.1f ms %10s %11s  %s\n", mode, atOnce, fmt.Sprintf("%d of %d", k, n),
		fleetview.Seconds(health), fleetview.Seconds(models)+est, fleetview.Seconds(total)+est, r.cpu.Seconds()/r.wall.Seconds(),
		lag, fmt.Sprintf("%d/%d", sat, sweeps), fmt.Sprintf("%d/%d", limited, rungs), s.Status)
}
