package judge

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func ladderLoad(conc, clean, first int) *results.Load {
	return &results.Load{Context: &results.ContextLadder{Concurrency: conc, LongestClean: clean, FirstKVBound: first, FirstPreempting: first}}
}

// The GPU that preempts a rung below its siblings is flagged, naming both lengths; one ladder
// alone, or ladders at other stream counts, flag nothing.
func TestContextFlagsTheGPUThatPreemptsFirst(t *testing.T) {
	m := &results.Model{Model: "m", Endpoints: []results.Endpoint{
		{GPUs: []int{0}, Load: ladderLoad(4, 8096, 0)},
		{GPUs: []int{1}, Load: ladderLoad(4, 4096, 8096)},
		{GPUs: []int{2}, Load: ladderLoad(4, 8096, 0)},
	}}
	contextFlags(m)
	if len(m.Endpoints[0].Flags) != 0 || len(m.Endpoints[2].Flags) != 0 || len(m.Endpoints[1].Flags) != 1 {
		t.Fatalf("flags %v / %v / %v", m.Endpoints[0].Flags, m.Endpoints[1].Flags, m.Endpoints[2].Flags)
	}
	f := m.Endpoints[1].Flags[0]
	if f.Check != CheckContextCompare || !strings.Contains(f.Reason, "preempts at 8096 tokens × 4 streams where a sibling GPU served 8096") {
		t.Errorf("flag %+v", f)
	}
	if k := kindOf(CheckContextCompare); k.layer != results.LayerGPU || k.action != results.ActionResetGPU {
		t.Errorf("layer %s, action %s", k.layer, k.action)
	}
	alone := &results.Model{Model: "m", Endpoints: []results.Endpoint{{GPUs: []int{1}, Load: ladderLoad(4, 4096, 8096)}}}
	contextFlags(alone)
	mixed := &results.Model{Model: "m", Endpoints: []results.Endpoint{{GPUs: []int{0}, Load: ladderLoad(8, 8096, 0)}, {GPUs: []int{1}, Load: ladderLoad(4, 4096, 8096)}}}
	contextFlags(mixed)
	if len(alone.Endpoints[0].Flags)+len(mixed.Endpoints[1].Flags) != 0 {
		t.Error("a ladder alone, or at another stream count, was compared")
	}
	// An engine that holds requests back instead of preempting (transformers'): the same flag, in its words.
	held := &results.Model{Model: "m", Endpoints: []results.Endpoint{{GPUs: []int{0}, Load: ladderLoad(4, 16288, 0)}, {GPUs: []int{1}, Load: ladderLoad(4, 4096, 8192)}}}
	held.Endpoints[1].Load.Context.FirstPreempting = 0
	contextFlags(held)
	if f := held.Endpoints[1].Flags; len(f) != 1 || !strings.Contains(f[0].Reason, "holds requests back for KV cache at 8192 tokens × 4 streams where a sibling GPU served 16288") {
		t.Errorf("held back: %+v", f)
	}
}

// A shared-prefix load whose engine hit less than half the expected share is an engine finding;
// one that hit most of it, or a load that shared nothing, is not.
func TestPrefixCacheMissing(t *testing.T) {
	load := func(hit, exp float64) *results.Load {
		return &results.Load{Server: &results.ServerMetrics{PrefixCache: &results.PrefixCache{QueriedTokens: 1000, HitTokens: hit * 1000, HitRate: hit, Expected: &exp}}}
	}
	if why := PrefixCacheMissing(load(0.1, 0.7)); !strings.Contains(why, "hits expected and not seen") {
		t.Errorf("10 %% of an expected 70 %%: %q", why)
	}
	for _, l := range []*results.Load{load(0.5, 0.7), load(0, 0.02), {Server: &results.ServerMetrics{}}, nil} {
		if why := PrefixCacheMissing(l); why != "" {
			t.Errorf("flagged: %q", why)
		}
	}
}

// Under one load, the GPU whose engine preempted where its siblings' preempted none is flagged; a
// few preemptions, or siblings that preempted too, flag nothing.
func TestPreemptionFlagsTheGPUWithLessKV(t *testing.T) {
	load := func(pre float64, sent int) *results.Load {
		return &results.Load{Server: &results.ServerMetrics{Preemptions: &pre}, Runs: []results.Run{{Requests: results.RequestCounts{Successful: sent}}}}
	}
	m := &results.Model{Model: "m", Endpoints: []results.Endpoint{{GPUs: []int{0}, Load: load(0, 500)}, {GPUs: []int{1}, Load: load(40, 500)}, {GPUs: []int{2}, Load: load(0, 500)}}}
	preemptionFlags(m)
	if len(m.Endpoints[1].Flags) != 1 || len(m.Endpoints[0].Flags)+len(m.Endpoints[2].Flags) != 0 {
		t.Fatalf("flags %v / %v / %v", m.Endpoints[0].Flags, m.Endpoints[1].Flags, m.Endpoints[2].Flags)
	}
	if f := m.Endpoints[1].Flags[0]; f.Check != CheckPreemption || !strings.Contains(f.Reason, "preempted 40 requests (of 500 sent) under the load its 2 sibling GPU(s) served without one") {
		t.Errorf("flag %+v", f)
	}
	for _, eps := range [][]results.Endpoint{
		{{GPUs: []int{0}, Load: load(0, 500)}, {GPUs: []int{1}, Load: load(2, 500)}},     // a few: luck
		{{GPUs: []int{0}, Load: load(5, 500)}, {GPUs: []int{1}, Load: load(40, 500)}},    // the sibling preempted too
		{{GPUs: []int{0}, Load: &results.Load{}}, {GPUs: []int{1}, Load: load(40, 500)}}, // no sibling counter
	} {
		m := &results.Model{Model: "m", Endpoints: eps}
		preemptionFlags(m)
		if len(m.Endpoints[1].Flags) != 0 {
			t.Errorf("flagged: %v", m.Endpoints[1].Flags)
		}
	}
}
