package health

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

// runBurn runs the GEMM burn on one GPU for o.Burn while sampling its telemetry every o.SampleEvery.
func runBurn(ctx context.Context, src gpu.Source, bench BenchRunner, gh *results.GPUHealth, o Options) *results.Burn {
	o.progress("gpu %d: burn %s", gh.GPU.Index, o.Burn)
	b := &results.Burn{Duration: results.Duration(o.Burn)}
	if gh.GPU.PowerLimitW != nil {
		b.PowerLimitW = *gh.GPU.PowerLimitW
	}
	bctx, cancel := context.WithTimeout(ctx, o.Burn)
	defer cancel()
	type outcome struct {
		tflops float64
		check  *results.ResultCheck
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		t, c, err := burn(bctx, bench, gh.GPU)
		done <- outcome{t, c, err}
	}()
	tick := time.NewTicker(o.SampleEvery)
	defer tick.Stop()
	start := time.Now()
	var sampleErr error
	for {
		select {
		case res := <-done:
			b.TFLOPS, b.Check = res.tflops, res.check
			if spec, ok := o.Catalog.LookupGPU(gh.GPU.Name); ok && spec.BF16TFLOPS > 0 && res.err == nil && res.tflops > 0 {
				b.Peak, b.Ratio = new(spec.BF16TFLOPS), new(res.tflops/spec.BF16TFLOPS)
			}
			if res.err != nil {
				b.Error = fmt.Sprintf("burn stopped after %.0f s: %v", time.Since(start).Seconds(), res.err)
			}
			if sampleErr != nil && len(b.Samples) == 0 {
				b.Error = results.JoinErr(b.Error, fmt.Sprintf("no telemetry during the burn: %v", sampleErr))
			}
			Summarise(b)
			return b
		case <-tick.C:
			s, err := src.Sample(gh.GPU.Index)
			if err != nil {
				sampleErr = err
				continue
			}
			s.T = time.Since(start).Seconds()
			b.Samples = append(b.Samples, s)
		}
	}
}

// Summarise fills the burn's power mean/max, minimum SM clock, maximum temperature and the clock-event
// reasons seen, from its samples.
func Summarise(b *results.Burn) {
	if len(b.Samples) == 0 {
		return
	}
	var sum float64
	var seen uint64
	b.MinSMClockMHz = 0
	for _, s := range b.Samples {
		sum += s.PowerW
		b.PowerMaxW = max(b.PowerMaxW, s.PowerW)
		if s.SMClockMHz > 0 && (b.MinSMClockMHz == 0 || s.SMClockMHz < b.MinSMClockMHz) {
			b.MinSMClockMHz = s.SMClockMHz
		}
		b.MaxTempC = max(b.MaxTempC, s.TempC)
		seen |= s.ClockReasons
	}
	b.PowerMeanW = sum / float64(len(b.Samples))
	b.ReasonsSeen = gpu.ReasonNames(seen)
}
