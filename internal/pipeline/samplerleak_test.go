package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// countingSource counts the samples read from its GPUs.
type countingSource struct {
	Source
	n atomic.Int64
}

func (c *countingSource) Sample(i int) (results.PowerSample, error) {
	c.n.Add(1)
	return c.Source.Sample(i)
}

// A load whose raw-records folder cannot be made fails its endpoint and stops the GPU sampling it
// started: before, the folder was made after the power sampler and the busy watch had started,
// and its error returned without stopping them, so they sampled the GPU until the run ended.
func TestLoadThatCannotWriteStopsSampling(t *testing.T) {
	p := quick(t, "sim.gpus=1", "power.enabled=true", "power.interval=100ms", "functional.enabled=false")
	if err := os.WriteFile(filepath.Join(p.Config.Output.Dir, "raw"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := NewDeps(p.Config, nil, nil)
	d.Load = stubLoad
	var cs *countingSource
	discover := d.Discover
	d.Discover = func(ctx context.Context, c config.Config) (Source, string, error) {
		src, name, err := discover(ctx, c)
		if src != nil {
			cs = &countingSource{Source: src}
			return cs, name, err
		}
		return src, name, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Run(ctx, p, d, Options{ToolVersion: "test", Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if ep := res.Summary.Hosts[0].Models[0].Endpoints[0]; ep.Status != results.StatusFailed {
		t.Fatalf("the load could not write its records, yet the endpoint is %s", ep.Status)
	}
	before := cs.n.Load()
	time.Sleep(600 * time.Millisecond)
	if after := cs.n.Load(); after != before {
		t.Errorf("the GPU is still sampled after the run: %d samples then %d", before, after)
	}
}
