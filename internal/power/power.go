// Package power samples a GPU's power, clocks and temperature while load runs (NVML on real GPUs,
// the simulator's virtual GPUs otherwise) and turns the samples into tokens per joule.
package power

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/metrics"
	"github.com/gpuvet/gpuvet/internal/results"
)

// SampleFunc reads one sample now (T is filled in by the sampler).
type SampleFunc func() (results.PowerSample, error)

// Sampler samples in the background until Stop.
type Sampler struct {
	interval time.Duration
	cancel   context.CancelFunc
	done     chan struct{}

	mu      sync.Mutex
	samples []results.PowerSample
	errs    int
	lastErr error
}

// Start samples fn every interval until Stop (one sample right away).
func Start(ctx context.Context, interval time.Duration, fn SampleFunc) *Sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &Sampler{interval: interval, cancel: cancel, done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			ps, err := fn()
			s.mu.Lock()
			if err != nil {
				s.errs++
				s.lastErr = err
			} else {
				ps.T = time.Since(start).Seconds()
				s.samples = append(s.samples, ps)
			}
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends sampling and summarises it. peakOutputTokS is the best output tok/s of the load
// (0 when unknown): tokens per joule = peakOutputTokS ÷ p90 power (the loaded plateau).
func (s *Sampler) Stop(peakOutputTokS float64) *results.Power {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return Summarise(s.samples, s.interval, peakOutputTokS, s.errs, s.lastErr)
}

// Summarise computes mean/max power and tokens per joule from samples.
func Summarise(samples []results.PowerSample, interval time.Duration, peakOutputTokS float64, errs int, lastErr error) *results.Power {
	p := &results.Power{IntervalSeconds: interval.Seconds(), Samples: samples}
	if len(samples) == 0 {
		p.Note = "no power samples"
		if lastErr != nil {
			p.Note += fmt.Sprintf(": %v", lastErr)
		}
		return p
	}
	ws := make([]float64, len(samples))
	sum := 0.0
	for i, s := range samples {
		ws[i] = s.PowerW
		sum += s.PowerW
		p.MaxW = max(p.MaxW, s.PowerW)
	}
	p.MeanW = sum / float64(len(samples))
	slices.Sort(ws)
	p90 := metrics.Percentile(ws, 0.9) // the p90 every figure of gpuvet's uses (ws[int(0.9n)] was the max up to 10 samples)
	busy := slices.ContainsFunc(samples, func(s results.PowerSample) bool { return s.UtilPct > 0 })
	if !busy && len(samples) >= 3 {
		// A load the GPU never saw: dividing its tokens by this GPU's idle power would be fiction.
		p.Note = "GPU utilisation stayed at 0 % during the load: the engine did not run on this GPU (a CPU or " +
			"simulated engine, or a wrong CUDA_VISIBLE_DEVICES); tokens per joule not computed"
	} else if peakOutputTokS > 0 && p90 > 0 {
		p.TokensPerJoule = peakOutputTokS / p90
		p.Note = fmt.Sprintf("tokens per joule = peak output %.0f tok/s ÷ p90 power %.0f W (the loaded plateau)", peakOutputTokS, p90)
	}
	if errs > 0 {
		p.Note = results.JoinErr(p.Note, fmt.Sprintf("%d samples failed (last: %v)", errs, lastErr))
	}
	return p
}
