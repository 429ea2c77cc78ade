package report

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 33: the report draws one telemetry chart per GPU with the rungs marked.
func TestTelemetryChartsOnePerGPU(t *testing.T) {
	samples := func(reasons uint64) []results.PowerSample {
		var out []results.PowerSample
		for i := 0; i < 10; i++ {
			out = append(out, results.PowerSample{T: float64(i), SMClockMHz: 1700, MemClockMHz: 3201, PowerW: 600, TempC: 60, ClockReasons: reasons})
		}
		return out
	}
	ld := &results.Load{Runs: []results.Run{{Kind: "synchronous", WindowStartS: 1, WindowSeconds: 3}, {Kind: "throughput", WindowStartS: 5, WindowSeconds: 3}}}
	m := results.Model{Model: "m", Endpoints: []results.Endpoint{
		{GPUs: []int{0}, Load: ld, Telemetry: &results.Telemetry{GPUs: []results.GPUTelemetry{{GPU: 0, Samples: samples(0x4)}}}},
		{GPUs: []int{1}, Load: ld, Telemetry: &results.Telemetry{GPUs: []results.GPUTelemetry{{GPU: 1, Samples: samples(0x8)}}}},
		{GPUs: []int{2}}, // no telemetry: no chart
	}}
	charts := telemetryCharts(m, map[int]int{0: 1980}, 700)
	if len(charts) != 2 {
		t.Fatalf("%d charts, want one per sampled GPU", len(charts))
	}
	c0, c1 := string(charts[0]), string(charts[1])
	for _, want := range []string{"GPU 0 under the load", "SM clock, % of 1980 MHz", "power, % of 700 W", "temperature, °C", ">R1<", ">R2<"} {
		if !strings.Contains(c0, want) {
			t.Errorf("chart 0 lacks %q", want)
		}
	}
	if !strings.Contains(c1, "SM clock, % of 1700 MHz") || !strings.Contains(c1, "hardware clock-event reason active") {
		t.Errorf("chart 1: want the max clock from the samples and the reason series")
	}
}
