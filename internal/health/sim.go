package health

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// IndexedBench is the simulator's microbenchmark shape (sim.Fleet): by GPU index, no context; Load
// marks a GPU busy so a simulated burn's telemetry shows a loaded card.
type IndexedBench interface {
	Microbench(i int, name string) (value float64, unit string, err error)
	Load(i int, d time.Duration) error
	// Mismatch says whether result number n (from 1) of a GEMM benchmark ("burn" or a microbenchmark
	// name), since into it, differs from the first result on GPU i (sim.FleetConfig.Corrupt).
	Mismatch(i int, bench string, n int64, since time.Duration) bool
}

// SimBench adapts the simulator's Fleet to BenchRunner. Each benchmark takes Pace (0: no time), as
// a real one takes its seconds, so a simulated health phase shows its schedule in wall time.
type SimBench struct {
	Fleet IndexedBench
	Pace  time.Duration
}

func (s SimBench) Microbench(ctx context.Context, g results.GPUInfo, name string) (float64, string, error) {
	if err := pace(ctx, s.Pace); err != nil {
		return 0, "", err
	}
	return s.Fleet.Microbench(g.Index, name)
}

// pace waits d, or until ctx ends (its error then).
func pace(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Burn holds the virtual GPU "busy" until ctx ends (the burn's telemetry comes from the Fleet's
// Sample) and reports the Fleet's BF16 GEMM figure as the sustained rate.
func (s SimBench) Burn(ctx context.Context, g results.GPUInfo) (float64, error) {
	v, _, err := s.CheckedBurn(ctx, g)
	return v, err
}

// simCheckMethod says what a simulated result check is.
const simCheckMethod = "simulated: results counted at the simulated BF16 GEMM rate, each compared with the first (a corrupt GPU, --sim-corrupt, differs)"

// CheckedBurn is Burn with the simulated result check: as many n=8192 BF16 GEMM results as the
// simulated rate gives, all equal to the first on a healthy GPU; on a corrupt one, one in
// sim.CorruptEvery differs from sim.CorruptFrom on (the Fleet's Mismatch).
func (s SimBench) CheckedBurn(ctx context.Context, g results.GPUInfo) (float64, *results.ResultCheck, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	last := start
	c := &results.ResultCheck{Method: simCheckMethod, Tile: "simulated: 64 elements of the first result within tolerance"}
	tflops, _, err := s.Fleet.Microbench(g.Index, "gemm_bf16")
	if err != nil {
		return 0, nil, err
	}
	perResult := 2 * math.Pow(8192, 3) / (tflops * 1e12) // seconds per GEMM
	var done float64
	for {
		select {
		case <-ctx.Done():
			return tflops, c, nil
		case now := <-tick.C:
			if err := s.Fleet.Load(g.Index, now.Sub(last)); err != nil {
				return 0, c, err
			}
			n := int64((done + now.Sub(last).Seconds()) / perResult)
			done += now.Sub(last).Seconds() - float64(n)*perResult
			last = now
			for k := int64(0); k < n; k++ {
				c.Checked++
				if s.Fleet.Mismatch(g.Index, "burn", c.Checked, now.Sub(start)) {
					c.Mismatches++
					if c.FirstMismatchS == nil {
						at := now.UTC()
						c.FirstMismatchS, c.FirstMismatchAt = new(now.Sub(start).Seconds()), &at
						c.MismatchDetail = fmt.Sprintf("result %d: row checksums differ from the first result's (simulated corruption)", c.Checked)
					}
				}
			}
		}
	}
}

// CheckedMicrobench is Microbench with the simulated result check of GEMMs: one result against the
// first; a corrupt GPU's BF16 GEMM differs.
func (s SimBench) CheckedMicrobench(ctx context.Context, g results.GPUInfo, name string) (float64, string, *results.ResultCheck, error) {
	v, unit, err := s.Microbench(ctx, g, name)
	if err != nil || !strings.Contains(name, "gemm") {
		return v, unit, nil, err
	}
	c := &results.ResultCheck{Method: simCheckMethod, Checked: 1, Tile: "simulated: 64 elements of the first result within tolerance"}
	if s.Fleet.Mismatch(g.Index, name, 1, 0) {
		c.Mismatches, c.FirstMismatchS = 1, new(0.0)
		c.MismatchDetail = "the last timed result's row checksums differ from the first result's (simulated corruption)"
	}
	return v, unit, c, nil
}

func (s SimBench) Describe(string) string { return "simulated (roofline model of the catalog GPU)" }

// Unavailable is a BenchRunner for a host whose GPUs are there but whose CUDA libraries are not: every
// benchmark fails with Err, so the result says why instead of silently omitting the figures.
type Unavailable struct{ Err error }

func (u Unavailable) Microbench(context.Context, results.GPUInfo, string) (float64, string, error) {
	return 0, "", u.Err
}

func (u Unavailable) Burn(context.Context, results.GPUInfo) (float64, error) { return 0, u.Err }

// UnavailableLinks is a LinkRunner for a host whose CUDA driver does not load: every measurement
// fails with Err, so the result says why.
type UnavailableLinks struct{ Err error }

func (u UnavailableLinks) PeerCopy(context.Context, results.GPUInfo, results.GPUInfo) (float64, float64, error) {
	return 0, 0, u.Err
}

func (u UnavailableLinks) AllReduce(context.Context, []results.GPUInfo, []int64) (*results.AllReduce, error) {
	return nil, u.Err
}

func (u UnavailableLinks) Describe() string { return "" }

// PeerFleet is the simulator's GPU-to-GPU shape (sim.Fleet): by GPU index, no context.
type PeerFleet interface {
	PeerCopy(a, b int) (uni, bi float64, err error)
	AllReduce(sizes []int64) []results.AllReduceSize
}

// SimLinks adapts the simulator's Fleet to LinkRunner; each copy and the all-reduce take Pace.
type SimLinks struct {
	Fleet PeerFleet
	Pace  time.Duration
}

func (s SimLinks) PeerCopy(ctx context.Context, a, b results.GPUInfo) (float64, float64, error) {
	if err := pace(ctx, s.Pace); err != nil {
		return 0, 0, err
	}
	return s.Fleet.PeerCopy(a.Index, b.Index)
}

func (s SimLinks) AllReduce(ctx context.Context, gpus []results.GPUInfo, sizes []int64) (*results.AllReduce, error) {
	if err := pace(ctx, s.Pace); err != nil {
		return nil, err
	}
	return &results.AllReduce{Status: results.StatusOK, Lib: "simulated", GPUs: len(gpus), Dtype: "float32",
		Sizes: s.Fleet.AllReduce(sizes), Params: "simulated ring all-reduce (the slowest GPU's links bound the bus bandwidth)"}, nil
}

func (s SimLinks) Describe() string {
	return "simulated (the pair's NVLink peak × a measured H200 efficiency)"
}
