package judge

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// CheckOutputsDiffer flags an endpoint whose greedy outputs (the functional suite's greedy case)
// differ from the other GPUs' of the same model, or from its own repeat where the others repeat
// theirs; alone, a repeat that differs leaves it undecided.
const CheckOutputsDiffer = "judge.outputs_differ"

// greedyAgreement compares the greedy outputs of a model's endpoints, on the promise that at batch 1
// and temperature 0 one engine version gives the same tokens on every GPU of one name and
// tensor-parallel size (only those are compared); not at all where no GPU repeats its own outputs.
func greedyAgreement(m *results.Model) {
	groups := map[string][]*results.Endpoint{}
	for i := range m.Endpoints {
		ep := &m.Endpoints[i]
		if ep.Functional == nil || ep.Functional.Greedy == nil {
			continue
		}
		if EngineFaulted(ep) {
			// An engine that ends requests early or cuts streams gives other tokens for its own
			// fault: its outputs say nothing of the GPU's arithmetic (its engine finding says why).
			m.Notes = appendNew(m.Notes, fmt.Sprintf("greedy outputs of %s not compared: its engine misbehaved during the load (%s)", gpuList(ep.GPUs), CheckEngineFault))
			continue
		}
		k := fmt.Sprintf("%s, tp %d", ep.GPUName, max(1, len(ep.GPUs)))
		groups[k] = append(groups[k], ep)
	}
	keys := slices.Sorted(maps.Keys(groups))
	if len(keys) > 1 {
		m.Notes = appendNew(m.Notes, "greedy outputs compared within each GPU model and tensor-parallel size only ("+strings.Join(keys, "; ")+"): another GPU or split may choose other kernels")
	}
	for _, k := range keys {
		agreeWithin(m, groups[k])
	}
}

// loneRepeatUndecided leaves undecided a GPU whose repeat differs with no other GPU of its name and
// split to compare: an engine that does not keep its greedy promise differs on every GPU (the
// case of several that all differ), so alone the difference is not the GPU's evidence.
func loneRepeatUndecided(ep *results.Endpoint) {
	ep.Verdicts = append(ep.Verdicts, results.Verdict{Check: CheckOutputsDiffer, Rule: "a GPU repeats its own greedy outputs (temperature 0, batch 1)",
		Source: "gpuvet's output rule (docs/correctness.md)", Result: ResultInconclusive,
		Reason: fmt.Sprintf("its repeat of the same prompts differs at %s, and no other %s of this split ran to tell the GPU from an engine that does not repeat itself: "+
			"vet it beside another GPU of its model (if that one repeats its outputs, this one's difference is the GPU's), or run `gpuvet health --burn 10m` on it", ep.Functional.Greedy.RepeatDiff, cmp.Or(ep.GPUName, "GPU"))})
}

func agreeWithin(m *results.Model, eps []*results.Endpoint) {
	flag := func(ep *results.Endpoint, format string, args ...any) {
		ep.Flags = append(ep.Flags, results.Flag{Scope: "gpu", Subject: subject(m.Model, ep), Check: CheckOutputsDiffer,
			Reason: "outputs differ: " + fmt.Sprintf(format, args...) + "; at temperature 0 and batch 1 a healthy GPU gives the tokens its siblings give: rerun, and drain the GPU if it persists (run `gpuvet health --burn 10m` on it)"})
	}
	var steady []*results.Endpoint
	for _, ep := range eps {
		if ep.Functional.Greedy.RepeatDiff == nil {
			steady = append(steady, ep)
		}
	}
	switch {
	case len(eps) == 1 && len(steady) == 0:
		loneRepeatUndecided(eps[0])
		return
	case len(steady) == 0:
		m.Notes = appendNew(m.Notes, fmt.Sprintf("greedy outputs not compared across GPUs: none of the %d GPUs repeats its own outputs at temperature 0 and batch 1, so the engine does not keep the promise the check rests on (deterministic greedy decoding)", len(eps)))
		return
	}
	for _, ep := range eps {
		if d := ep.Functional.Greedy.RepeatDiff; d != nil {
			flag(ep, "its repeat of the same prompts differs at %s, while %d other GPU(s) repeat theirs", d, len(steady))
		}
	}
	// Classes of equal outputs among the GPUs that repeat theirs; the largest is the majority when
	// it holds more than half of them.
	var classes [][]*results.Endpoint
	for _, ep := range steady {
		same := func(c []*results.Endpoint) bool { return ep.Functional.Greedy.FirstDiff(c[0].Functional.Greedy) == nil }
		if i := slices.IndexFunc(classes, same); i >= 0 {
			classes[i] = append(classes[i], ep)
		} else {
			classes = append(classes, []*results.Endpoint{ep})
		}
	}
	if len(classes) < 2 {
		return
	}
	sort.SliceStable(classes, func(i, j int) bool { return len(classes[i]) > len(classes[j]) })
	major := classes[0]
	if 2*len(major) <= len(steady) {
		for _, c := range classes {
			for _, ep := range c {
				other := major[0]
				if other == ep {
					other = classes[1][0]
				}
				flag(ep, "%s differs from %s's at %s, and no majority of GPUs says which is right", gpuList(ep.GPUs), gpuList(other.GPUs), ep.Functional.Greedy.FirstDiff(other.Functional.Greedy))
			}
		}
		return
	}
	var names []string
	for _, ep := range major {
		names = append(names, strings.TrimPrefix(strings.TrimPrefix(gpuList(ep.GPUs), "gpus "), "gpu "))
	}
	for _, c := range classes[1:] {
		for _, ep := range c {
			flag(ep, "they differ from the majority's (gpus %s) at %s", strings.Join(names, ","), ep.Functional.Greedy.FirstDiff(major[0].Functional.Greedy))
		}
	}
}
