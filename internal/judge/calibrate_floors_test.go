package judge

import (
	"bytes"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gpuvet/gpuvet/internal/results"
)

func healthRun(ratios map[string]float64, busy bool) *results.Summary {
	g := results.GPUHealth{GPU: results.GPUInfo{Name: "NVIDIA H200"}}
	for name, r := range ratios {
		r := r
		if name == results.FloorBurn {
			g.Burn = &results.Burn{TFLOPS: 670, Ratio: &r}
			continue
		}
		g.Bench = append(g.Bench, results.Microbench{Name: name, Value: 1, Ratio: &r, Status: results.StatusOK})
	}
	if busy {
		g.Busy = &results.Busy{When: "health", Reason: "busy: PID 4242 python3, 8.1 GiB"}
	}
	return &results.Summary{Hosts: []results.Host{{Health: &results.Health{GPUs: []results.GPUHealth{g}}}}}
}

func TestCalibrateFloors(t *testing.T) {
	runs := []CalibRun{
		{Label: "a.json", Summary: healthRun(map[string]float64{"gemm_bf16": 0.80, "hbm_d2d": 0.89, results.FloorBurn: 0.68}, false)},
		{Label: "b.json", Summary: healthRun(map[string]float64{"gemm_bf16": 0.76, "hbm_d2d": 0.86}, false)},
		{Label: "c.json", Summary: healthRun(map[string]float64{"gemm_bf16": 0.30, "hbm_d2d": 0.41}, true)}, // a co-tenant's figures: left out
	}
	es := CalibrateFloors(runs, results.FloorMarginPct)
	if len(es) != 1 {
		t.Fatalf("%+v", es)
	}
	e := es[0]
	// Worst healthy BF16 0.76 × 0.75 = 0.57; HBM 0.86 × 0.75 = 0.645 -> 0.64; burn 0.68 × 0.75 = 0.51.
	if e.Floors["gemm_bf16"] != 0.57 || e.Floors["hbm_d2d"] != 0.64 || e.Floors[results.FloorBurn] != 0.51 || len(e.Ratios["gemm_bf16"]) != 2 {
		t.Errorf("floors %v from %v", e.Floors, e.Ratios)
	}
	var b bytes.Buffer
	if err := WriteFloorsYAML(&b, es, results.FloorMarginPct); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "c.json gpu 0 left out: busy: PID 4242") {
		t.Errorf("no note of the busy run:\n%s", b.String())
	}
	var back struct {
		Floors map[string]map[string]float64 `yaml:"reference_floors"`
	}
	if err := yaml.Unmarshal(b.Bytes(), &back); err != nil || back.Floors["NVIDIA H200"]["gemm_bf16"] != 0.57 {
		t.Errorf("yaml %v: %+v\n%s", err, back, b.String())
	}
}
