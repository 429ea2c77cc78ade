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
