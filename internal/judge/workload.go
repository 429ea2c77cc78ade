package judge

import (
	"fmt"
	"slices"

	"github.com/gpuvet/gpuvet/internal/results"
)

// CheckPrefixCache flags an engine whose prefix cache did not reuse what the workload shared.
const CheckPrefixCache = "engine.prefix_cache"

// Prefix-cache rule: a workload sharing at least PrefixExpectMin of its prompt tokens must see at
// least PrefixSeenShare of that share hit in the engine's counters. With caching on, an engine falls
// short of the ideal only by evictions and prompts sent before their prefix was computed, far less
// than half; with it off it hits nothing.
const (
	PrefixExpectMin = 0.05
	PrefixSeenShare = 0.5
)

// PrefixCacheMissing says that the engine's counters did not show the prefix-cache hits the load's
// workload should have had ("" when they did, or nothing was expected or measured).
func PrefixCacheMissing(l *results.Load) string {
	if l == nil || l.Server == nil || l.Server.PrefixCache == nil || l.Server.PrefixCache.Expected == nil {
		return ""
	}
	pc := l.Server.PrefixCache
	exp := *pc.Expected
	if exp < PrefixExpectMin || pc.HitRate >= exp*PrefixSeenShare {
		return ""
	}
	seen := fmt.Sprintf("the engine's prefix cache hit %.1f %% (its own counters, %.0f of %.0f tokens)", pc.HitRate*100, pc.HitTokens, pc.QueriedTokens)
	if pc.QueriedTokens == 0 {
		seen = "the engine's prefix cache looked up no token (its counters stayed at 0: caching is off)"
	}
	return fmt.Sprintf("the workload shares %.0f %% of its prompt tokens (an ideal cache on the prompts sent), %s: "+
		"hits expected and not seen; turn prefix caching on (vLLM: it is on unless --no-enable-prefix-caching) or give its KV cache room",
		exp*100, seen)
}

// CheckContextCompare flags a GPU that runs out of KV cache at a shorter context than its siblings
// under the same long-context ladder.
const CheckContextCompare = "compare.context"

// contextFlags flags a GPU of one model whose longest clean context is a rung or more below its
// siblings' and that ran out of KV cache (preempted, or held requests back). One ladder alone, or
// ladders at different stream counts, compare nothing.
func contextFlags(m *results.Model) {
	best, peers := 0, 0
	for _, ep := range m.Endpoints {
		if c := ladderOf(ep.Load); c != nil {
			best, peers = max(best, c.LongestClean), peers+1
		}
	}
	if peers < 2 {
		return
	}
	for ei := range m.Endpoints {
		ep := &m.Endpoints[ei]
		c := ladderOf(ep.Load)
		if c == nil || c.FirstKVBound == 0 || c.LongestClean >= best || sameConcurrency(m, c.Concurrency) != peers {
			continue
		}
		how := "preempts"
		if c.FirstPreempting != c.FirstKVBound {
			how = "holds requests back for KV cache"
		}
		ep.Flags = append(ep.Flags, results.Flag{Scope: "gpu", Subject: subject(m.Model, ep), Check: CheckContextCompare,
			Reason: fmt.Sprintf("%s at %d tokens × %d streams where a sibling GPU served %d without running out: it holds less KV cache than its siblings with the same model and engine (memory retired, hidden or held by another process): reset it and vet it again",
				how, c.FirstKVBound, c.Concurrency, best)})
	}
}

// ladderOf is a load's context ladder when it measured preemptions (nil: none to compare).
func ladderOf(l *results.Load) *results.ContextLadder {
	if l == nil || l.Context == nil || l.Context.Note != "" {
		return nil
	}
	return l.Context
}

// sameConcurrency counts the model's ladders run at conc streams.
func sameConcurrency(m *results.Model, conc int) int {
	n := 0
	for _, ep := range m.Endpoints {
		if c := ladderOf(ep.Load); c != nil && c.Concurrency == conc {
			n++
		}
	}
	return n
}

// CheckPreemption flags a GPU whose engine preempted requests under a load its siblings served
// without one: it holds less KV cache.
const CheckPreemption = "compare.preemption"

// Preemption rule: a GPU is flagged when its engine preempted at least preemptMin requests and
// preemptShare of those sent while every sibling's preempted none; a few near the cache's edge are
// the load's luck, not a smaller cache.
const (
	preemptMin   = 3
	preemptShare = 0.01
)

// preemptionFlags compares the preemption counters of one model's GPUs under the same load.
func preemptionFlags(m *results.Model) {
	var counted []*results.Endpoint
	for ei := range m.Endpoints {
		if ep := &m.Endpoints[ei]; preemptions(ep.Load) != nil {
			counted = append(counted, ep)
		}
	}
	if len(counted) < 2 {
		return
	}
	for _, ep := range counted {
		p, sent := *preemptions(ep.Load), sentRequests(ep.Load)
		if p < preemptMin || p < preemptShare*float64(sent) {
			continue
		}
		if !slices.ContainsFunc(counted, func(sib *results.Endpoint) bool { return sib != ep && *preemptions(sib.Load) != 0 }) {
			ep.Flags = append(ep.Flags, results.Flag{Scope: "gpu", Subject: subject(m.Model, ep), Check: CheckPreemption,
				Reason: fmt.Sprintf("its engine preempted %.0f requests (of %d sent) under the load its %d sibling GPU(s) served without one: it holds less KV cache than they do with the same model and engine (memory retired, hidden or held by another process): reset it and vet it again",
					p, sent, len(counted)-1)})
		}
	}
}

func preemptions(l *results.Load) *float64 {
	if l == nil || l.Server == nil {
		return nil
	}
	return l.Server.Preemptions
}

func sentRequests(l *results.Load) int {
	n := 0
	for _, r := range l.Runs {
		q := r.Requests
		n += q.Successful + q.Errored + q.Incomplete + q.Warmup
	}
	return n
}
