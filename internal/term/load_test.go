package term

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/analysis"
	"github.com/gpuvet/gpuvet/internal/results"
)

func TestLoad(t *testing.T) {
	wait := 81.6
	sat := analysis.AnalyzeSaturation([]float64{400, 800, 1200, 1600, 2000, 2400}, 2700)
	l := &results.Load{
		Runs: []results.Run{
			{Kind: "synchronous", Concurrency: 1, Requests: results.RequestCounts{Successful: 9}, ReqS: 0.4, OutputTokS: 100, EngineCPUWaitPct: &wait},
			{Kind: "constant", TargetRate: 2.5, Requests: results.RequestCounts{Successful: 50, Errored: 2, Incomplete: 1},
				Errors: map[string]int{"http_429": 2}, OutputTokS: 2400, ClientLimited: true, ClientReason: "CLIENT-LIMITED: x"},
		},
		Saturation: &sat, PeakOutputTokS: 2400, SustainedReqS: 9.4, TokenCounts: "server /tokenize", OutputCounts: "continuous_usage_stats",
		Client: results.ClientCheck{ClientLimited: true, Reason: "constant rung: CLIENT-LIMITED: x"},
	}
	var b bytes.Buffer
	Load(&b, l)
	out := b.String()
	for _, want := range []string{"synchronous", "2.50/s", "CLIENT-LIMITED", "http_429=2", "LOWER BOUND", "unsaturated", "!!! Constant rung", "server /tokenize", "its processes waited for a CPU; high, the host's CPUs set its pace): 82 %, –"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
