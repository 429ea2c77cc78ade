package report

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The report says how long the run took, phase by phase and GPU by GPU, how health and the engines
// ran across the GPUs, and why that many at once; a summary without timing has no such section.
func TestHTMLTimeToVet(t *testing.T) {
	s := readSample(t)
	if strings.Contains(render(t, s), `id="time-to-vet"`) {
		t.Fatal("a summary without timing got a time-to-vet section")
	}
	s.Timing = &results.Timing{TotalSeconds: 312, Phases: []results.PhaseTime{
		{Phase: "health", Seconds: 14.2, Schedule: "8 GPUs at once"}, {Phase: "models", Seconds: 297, Schedule: "8 engines at once (auto)"}}}
	s.Meta.Parallel = &results.ParallelChoice{Mode: "auto", GPUs: 8, Slots: 8, Reason: "auto: all 8 engines at once: each needs up to 0.33 cores"}
	s.Hosts[0].Health.Timing = []results.PhaseTime{{Phase: "pcie", Seconds: 3.1, Schedule: "2 waves of GPUs that share no PCIe switch"}}
	s.Hosts[0].Models[0].Endpoints[0].Timing = &results.EndpointTiming{TotalSeconds: 290, ServeSeconds: 20, LoadSeconds: 265, FunctionalSeconds: 5}
	out := render(t, s)
	for _, want := range []string{"Time to vet", "Total", "5m12s", "Phase health", "14 s (8 GPUs at once)", "4m57s (8 engines at once (auto))",
		"GPUs at once", "each needs up to 0.33 cores", "2 waves of GPUs that share no PCIe switch",
		"on GPU 0", "4m50s (serve 20 s, warm-up 0.0 s, load 4m25s, API suite 5.0 s)"} {
		if !strings.Contains(out, template_escape(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	if i, j := strings.Index(out, `id="time-to-vet"`), strings.Index(out, `id="caveats"`); i > j {
		t.Error("time to vet after the caveats")
	}
}
