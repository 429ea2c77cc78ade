package judge

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func greedyEP(gpu int, name string, ids []int, repeatDiffers bool) results.Endpoint {
	g := &results.GreedyOutputs{Basis: "token_ids", Outputs: []results.GreedyOutput{{Prompt: "p0", TokenIDs: []int{1, 2, 3}}, {Prompt: "p1", TokenIDs: ids}}}
	if repeatDiffers {
		g.RepeatDiff = &results.OutputDiff{Prompt: 1, Position: 2, Unit: "token", Got: "9", Want: "7"}
	}
	return results.Endpoint{GPUs: []int{gpu}, GPUName: name, Status: results.StatusOK, Functional: &results.Functional{Status: results.StatusOK, Greedy: g}}
}

func outputFlags(m *results.Model) map[int]string {
	out := map[int]string{}
	for _, ep := range m.Endpoints {
		for _, f := range ep.Flags {
			if f.Check == CheckOutputsDiffer {
				out[ep.GPUs[0]] = f.Reason
			}
		}
	}
	return out
}

func TestGreedyOutputsAgreement(t *testing.T) {
	same, other := []int{5, 6, 7, 8}, []int{5, 6, 7, 9}
	for _, c := range []struct {
		name  string
		eps   []results.Endpoint
		flags map[int]string // gpu -> part of the reason
		note  string
	}{
		{"all agree", []results.Endpoint{greedyEP(0, "H200", same, false), greedyEP(1, "H200", same, false), greedyEP(2, "H200", same, false)}, map[int]string{}, ""},
		{"one of four differs", []results.Endpoint{greedyEP(0, "H200", same, false), greedyEP(1, "H200", same, false), greedyEP(2, "H200", other, false), greedyEP(3, "H200", same, false)},
			map[int]string{2: "outputs differ: they differ from the majority's (gpus 0,1,3) at prompt 1, token 3: 9 instead of 8"}, ""},
		{"single GPU, repeat differs: undecided, not flagged", []results.Endpoint{greedyEP(0, "H200", same, true)}, map[int]string{}, ""},
		{"single GPU, repeat agrees", []results.Endpoint{greedyEP(0, "H200", same, false)}, map[int]string{}, ""},
		{"no GPU repeats: the engine is not deterministic", []results.Endpoint{greedyEP(0, "H200", same, true), greedyEP(1, "H200", other, true)}, map[int]string{}, "none of the 2 GPUs repeats"},
		{"one GPU does not repeat", []results.Endpoint{greedyEP(0, "H200", same, true), greedyEP(1, "H200", same, false), greedyEP(2, "H200", same, false)},
			map[int]string{0: "while 2 other GPU(s) repeat theirs"}, ""},
		{"two GPUs, no majority", []results.Endpoint{greedyEP(0, "H200", same, false), greedyEP(1, "H200", other, false)},
			map[int]string{0: "no majority", 1: "gpu 1 differs from gpu 0's at prompt 1, token 3: 9 instead of 8"}, ""},
		{"different GPU models are not compared", []results.Endpoint{greedyEP(0, "H200", same, false), greedyEP(1, "H100", other, false)}, map[int]string{}, "within each GPU model"},
	} {
		m := &results.Model{Model: "m", Endpoints: c.eps}
		applyModel(m, Config{}, len(c.eps), false, nil, nil)
		applyModel(m, Config{}, len(c.eps), false, nil, nil) // twice: the same verdicts, no duplicate note
		got := outputFlags(m)
		if len(got) != len(c.flags) {
			t.Errorf("%s: flags %v, want on %v", c.name, got, c.flags)
		}
		for g, want := range c.flags {
			if !strings.Contains(got[g], want) {
				t.Errorf("%s: gpu %d reason %q, want %q", c.name, g, got[g], want)
			}
			if m.Endpoints[g].Status != results.StatusFlag {
				t.Errorf("%s: gpu %d status %s", c.name, g, m.Endpoints[g].Status)
			}
		}
		if c.note != "" && (len(m.Notes) != 1 || !strings.Contains(m.Notes[0], c.note)) {
			t.Errorf("%s: notes %q, want %q", c.name, m.Notes, c.note)
		}
	}
}

// Alone, a GPU whose repeat differs is undecided, never flagged: an engine that does not repeat its
// greedy outputs differs on every GPU, and with one GPU nothing tells the two apart. The finding
// is the GPU's, inconclusive, and says what decides it.
func TestLoneGPURepeatDiffersIsUndecided(t *testing.T) {
	m := results.Model{Model: "m", Endpoints: []results.Endpoint{greedyEP(0, "H200", []int{5, 6, 7, 8}, true)}}
	applyModel(&m, Config{}, 1, false, nil, nil)
	ep := &m.Endpoints[0]
	if len(outputFlags(&m)) != 0 || !undecided(ep) {
		t.Fatalf("flags %v, undecided %v: want no flag and an undecided verdict", ep.Flags, undecided(ep))
	}
	var got []results.Finding
	for _, f := range endpointFindings("h", m.Model, ep) {
		if f.Check == CheckOutputsDiffer {
			got = append(got, f)
		}
	}
	if len(got) != 1 || got[0].Layer != results.LayerGPU || got[0].Status != results.StatusInconclusive || got[0].Action != results.ActionRerun ||
		!strings.Contains(got[0].Reason, "differs at prompt 1, token 2: 9 instead of 7") || !strings.Contains(got[0].Reason, "vet it beside another GPU of its model") {
		t.Errorf("findings %+v: want one of the GPU's, inconclusive, rerun, naming the difference and what decides it", got)
	}
}

// Through the whole judge: the lone GPU's verdict and the run are inconclusive, never flagged, and
// the GPU's reasons say what decides it; with a sibling that repeats its outputs it is flagged.
func TestLoneGPURepeatDiffersThroughApply(t *testing.T) {
	withGreedy := func(s *results.Summary, repeatDiffers ...bool) {
		for i, d := range repeatDiffers {
			ep := &s.Hosts[0].Models[0].Endpoints[i]
			g := greedyEP(i, ep.GPUName, []int{5, 6, 7, 8}, d)
			ep.Functional = g.Functional
		}
	}
	s := summary(healthy())
	withGreedy(s, true)
	Apply(s, DefaultConfig())
	g := s.Hosts[0].GPUs[0]
	if g.Status != results.StatusInconclusive || s.Status != results.StatusInconclusive || !strings.Contains(strings.Join(g.Why, " "), "vet it beside another GPU of its model") {
		t.Errorf("alone: gpu %s (why %q), run %s; want both inconclusive, saying what decides it", g.Status, g.Why, s.Status)
	}
	s = summary(healthy(), healthy())
	withGreedy(s, true, false)
	Apply(s, DefaultConfig())
	if g := s.Hosts[0].GPUs[0]; g.Status != results.StatusFlag || !slices.Contains(g.Checks, CheckOutputsDiffer) || g.Action != results.ActionDrainRMA {
		t.Errorf("beside a sibling that repeats: gpu 0 %s (checks %q, action %s), want flagged by %s", g.Status, g.Checks, g.Action, CheckOutputsDiffer)
	}
}
