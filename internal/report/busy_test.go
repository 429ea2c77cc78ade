package report

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The power chart shows when another process appeared on a GPU during its load (issue 26).
func TestPowerChartShowsBusy(t *testing.T) {
	at := 6.0
	m := results.Model{Endpoints: []results.Endpoint{{GPUs: []int{1},
		Power: &results.Power{Samples: []results.PowerSample{{T: 0, PowerW: 300}, {T: 5, PowerW: 600}, {T: 10, PowerW: 690}}},
		Busy:  []results.Busy{{When: "during the load", T: &at, Reason: "gpu 1 busy: PID 4242 python3, 8.1 GiB"}}}}}
	svg := string(powerChart(m, 700))
	if !strings.Contains(svg, `class="event"`) || !strings.Contains(svg, "shared: gpu 1 busy: PID 4242 python3, 8.1 GiB") {
		t.Errorf("no busy mark:\n%s", svg)
	}
	m.Endpoints[0].Busy[0].T = nil // before the engine: nothing to place on the chart
	if strings.Contains(string(powerChart(m, 700)), `class="event"`) {
		t.Error("a busy record without a time drew a mark")
	}
}

func TestPrometheusBusyAndFloors(t *testing.T) {
	r, fl := 0.32, 0.6
	s := &results.Summary{SchemaVersion: results.SchemaVersion, Status: results.StatusFlag, Complete: true, Hosts: []results.Host{{Name: "h", Health: &results.Health{GPUs: []results.GPUHealth{
		{GPU: results.GPUInfo{Index: 0}, Busy: &results.Busy{When: "health", Reason: "busy: PID 4242 python3, 8.1 GiB"},
			Bench: []results.Microbench{{Name: "gemm_bf16", Value: 312, Unit: "TFLOP/s", Ratio: &r, Floor: &fl, Status: results.StatusFlag}}},
		{GPU: results.GPUInfo{Index: 1}}}}}}}
	b, err := Prometheus(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`gpuvet_gpu_busy{host="h",gpu="0"} 1`, `gpuvet_gpu_busy{host="h",gpu="1"} 0`, `gpuvet_gpu_bench_floor_ratio{host="h",gpu="0",bench="gemm_bf16"} 0.6`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("lacks %s:\n%s", want, b)
		}
	}
}
