package power

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

func TestSummarise(t *testing.T) {
	var s []results.PowerSample
	for i := 1; i <= 10; i++ {
		s = append(s, results.PowerSample{PowerW: float64(i * 100), UtilPct: 90})
	}
	p := Summarise(s, time.Second, 5000, 0, nil)
	// p90 of 100..1000 W is 910 W (numpy's linear p90, as every gpuvet percentile), not the max.
	if p.MeanW != 550 || p.MaxW != 1000 || math.Abs(p.TokensPerJoule-5000.0/910) > 1e-9 {
		t.Fatalf("got mean %v max %v tok/J %v", p.MeanW, p.MaxW, p.TokensPerJoule)
	}
	if p := Summarise(nil, time.Second, 5000, 3, errors.New("nvml: gone")); p.TokensPerJoule != 0 || p.Note == "" {
		t.Fatalf("no samples must say so: %+v", p)
	}
}

func TestIdleGPUGetsNoTokensPerJoule(t *testing.T) {
	idle := []results.PowerSample{{PowerW: 80}, {PowerW: 82}, {PowerW: 81}}
	if p := Summarise(idle, time.Second, 4000, 0, nil); p.TokensPerJoule != 0 || !strings.Contains(p.Note, "did not run on this GPU") {
		t.Fatalf("an idle GPU under load must not get tokens per joule: %+v", p)
	}
}

func TestSamplerCollectsAndCountsErrors(t *testing.T) {
	var n atomic.Int32
	s := Start(context.Background(), 10*time.Millisecond, func() (results.PowerSample, error) {
		if n.Add(1)%2 == 0 {
			return results.PowerSample{}, errors.New("transient")
		}
		return results.PowerSample{PowerW: 300, UtilPct: 50}, nil
	})
	time.Sleep(100 * time.Millisecond)
	p := s.Stop(600)
	if len(p.Samples) < 2 || p.MeanW != 300 || p.TokensPerJoule != 2 {
		t.Fatalf("got %+v", p)
	}
	for i := 1; i < len(p.Samples); i++ {
		if p.Samples[i].T <= p.Samples[i-1].T {
			t.Fatalf("sample times not increasing: %v", p.Samples)
		}
	}
}
