package judge

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 42: throughput is judged against a reference even with no peer. A lone GPU with no
// reference and no healthy share for its engine is inconclusive, saying so and what would judge
// it; with the simulator's measured share, a card 20 % below the expected peak is flagged and a
// healthy one passes; a reference throughput gate judges it instead; a busy GPU's % SOL is marked.
func TestExpectedThroughputWithoutAPeer(t *testing.T) {
	s := summary(healthy())
	Apply(s, DefaultConfig())
	ep := s.Hosts[0].Models[0].Endpoints[0]
	v := verdict(t, ep, CheckExpected)
	if v.Result != ResultInconclusive || !strings.Contains(v.Reason, "throughput not judged: no reference for "+testGPU+" × "+testModel+", no peer GPU") ||
		!strings.Contains(v.Reason, "gpuvet calibrate") || s.Status != results.StatusInconclusive {
		t.Fatalf("lone vllm GPU: %s (%s), run %s", v.Result, v.Reason, s.Status)
	}

	sim := func(p perf) *results.Summary {
		s := summary(p)
		m := &s.Hosts[0].Models[0]
		m.Engine.Kind, m.Engine.Version = "sim", "gpuvet-sim"
		peak := m.Endpoints[0].Load.PeakOutputTokS
		if peak == 0 {
			peak = PeakRun(m.Endpoints[0].Load).OutputTokS
		}
		// The bound healthy() reaches 52 % of.
		bound := healthy().sustained * healthy().outTokPerReq / 0.52
		m.Endpoints[0].SpeedOfLight = &results.SpeedOfLight{BoundOutputTokS: bound, Batch: 32, ReachedBatch: 18, GPU: "H200", MeasuredOutputTokS: peak}
		return s
	}
	s = sim(healthy())
	Apply(s, DefaultConfig())
	if v := verdict(t, s.Hosts[0].Models[0].Endpoints[0], CheckExpected); v.Result != ResultPass || !strings.Contains(v.Rule, "expected") {
		t.Errorf("healthy simulated GPU: %s (%s; %s)", v.Result, v.Reason, v.Rule)
	}
	s = sim(healthy().scaled(0.2))
	Apply(s, DefaultConfig())
	ep = s.Hosts[0].Models[0].Endpoints[0]
	if v := verdict(t, ep, CheckExpected); v.Result != ResultFail || ep.Status != results.StatusFlag || !strings.Contains(v.Source, "roofline") {
		t.Errorf("20 %% slow simulated GPU: %s (%s), endpoint %s", v.Result, v.Reason, ep.Status)
	}

	// A load that kept few sequences in flight (a synchronous run, a low concurrency) reaches less of
	// the bound however healthy the GPU: the expected share does not apply, and alone it is not judged.
	s = sim(healthy().scaled(0.5))
	s.Hosts[0].Models[0].Endpoints[0].SpeedOfLight.ReachedBatch = 2
	Apply(s, DefaultConfig())
	if v := verdict(t, s.Hosts[0].Models[0].Endpoints[0], CheckExpected); v.Result != ResultInconclusive || !strings.Contains(v.Reason, "sequences in flight") {
		t.Errorf("a load that filled 2 of 32: %s (%s)", v.Result, v.Reason)
	}

	// A reference entry with a throughput gate judges it: no derived figure, no "not judged".
	cfg := DefaultConfig()
	cfg.Reference = map[string]map[string]Override{testGPU: {testModel: {MinThroughputReqS: fp(30)}}}
	s = summary(healthy())
	Apply(s, cfg)
	for _, v := range s.Hosts[0].Models[0].Endpoints[0].Verdicts {
		if v.Check == CheckExpected {
			t.Errorf("with a reference throughput gate: %+v", v)
		}
	}
	if s.Status != results.StatusOK {
		t.Errorf("lone GPU with a reference: %s", s.Status)
	}

	// A busy GPU's % SOL is marked.
	s = sim(healthy())
	s.Hosts[0].Models[0].Endpoints[0].Busy = []results.Busy{{Reason: "busy: PID 4242 python3"}}
	Apply(s, DefaultConfig())
	if m := s.Hosts[0].Models[0].Endpoints[0].SpeedOfLight.Marked; !strings.HasPrefix(m, "busy") {
		t.Errorf("busy GPU's %% SOL marked %q", m)
	}
}

// A node whose GPUs are all equally slow, served by an engine with no measured healthy share and
// no reference: GPU to GPU finds nothing, and nothing judges them all. The absolute throughput is a
// check not made (disabled, source none): the run stays ok on what was judged, but every surface
// says it is partial and what would judge it.
func TestPeersWithoutAReferenceArePartial(t *testing.T) {
	s := summary(healthy().scaled(0.3), healthy().scaled(0.3))
	Apply(s, DefaultConfig())
	ep := s.Hosts[0].Models[0].Endpoints[0]
	v := verdict(t, ep, CheckExpected)
	if v.Result != ResultDisabled || v.Source != results.SourceNone || !strings.Contains(v.Reason, "absolute throughput not judged, only GPU to GPU") {
		t.Fatalf("verdict %s %s: %s", v.Result, v.Source, v.Reason)
	}
	sk := strings.Join(s.SkippedChecks(), "\n")
	if !strings.Contains(sk, testModel+" on "+testGPU+": absolute throughput not judged") || !strings.Contains(sk, "gpuvet calibrate") {
		t.Fatalf("skipped checks %q", sk)
	}
	// A reference judges them: nothing left unmade.
	cfg := DefaultConfig()
	cfg.Reference = map[string]map[string]Override{testGPU: {testModel: {MinThroughputReqS: fp(30)}}}
	s = summary(healthy().scaled(0.3), healthy().scaled(0.3))
	Apply(s, cfg)
	if strings.Contains(strings.Join(s.SkippedChecks(), "\n"), "not judged") || s.Status != results.StatusFlag {
		t.Fatalf("with a reference: %s, %q", s.Status, s.SkippedChecks())
	}
}
