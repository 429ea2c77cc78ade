package sim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/catalog"
)

// words is n distinct space-led words: each one piece of the simulator's tokenizer (≤ 4 bytes).
func words(tag string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " %s%02x", tag, i%256)
	}
	return b.String()
}

func TestBlockHashesChainThePrefix(t *testing.T) {
	shared := words("a", 64)
	a, b := blockHashes(shared+words("b", 40), 16), blockHashes(shared+words("c", 40), 16)
	if len(a) != 6 || len(b) != 6 {
		t.Fatalf("blocks %d and %d, want 6 (104 tokens in blocks of 16)", len(a), len(b))
	}
	for k := range 4 {
		if a[k] != b[k] {
			t.Errorf("block %d of the shared 64-token prefix differs", k)
		}
	}
	if a[4] == b[4] {
		t.Error("block 4 (after the prefix) is the same in both")
	}
	// The same block after a different prefix is another block.
	c := blockHashes(words("z", 16)+words("a", 64)[16*5:], 16)
	if c[1] == a[1] {
		t.Error("a block's hash does not cover what came before it")
	}
}

func TestEngineSkipsCachedPrefix(t *testing.T) {
	for _, on := range []bool{true, false} {
		g, _ := catalog.Builtin().LookupGPU("H100")
		m, _ := catalog.Builtin().LookupModel("Qwen/Qwen3-8B")
		p, err := NewPerf(g, m, EngineConfig{NoPrefixCache: !on})
		if err != nil {
			t.Fatal(err)
		}
		e := NewEngine(p)
		shared := words("p", 512)
		run := func(text string) {
			s := &Seq{Prompt: Count(text), MaxOut: 2}
			if on {
				s.Blocks = blockHashes(text, 16)
			}
			e.Add(s)
			for !e.Idle() {
				e.Step()
			}
		}
		run(shared + words("x", 100))
		run(shared + words("y", 100))
		want := int64(0)
		if on {
			want = 512
		}
		if e.PrefixHits != want || (on && e.PrefixQueries != 2*612) {
			t.Errorf("prefix caching %v: hits %d of %d queried, want %d", on, e.PrefixHits, e.PrefixQueries, want)
		}
	}
}

func TestMetricsCountPrefixHits(t *testing.T) {
	s := start(t, Config{GPU: "H100", Model: "Qwen/Qwen3-8B", Seed: 1})
	shared := words("q", 256)
	for _, tail := range []string{"r", "s", "t"} {
		post(t, s.URL()+"/v1/completions", map[string]any{"prompt": shared + words(tail, 50), "max_tokens": 2})
	}
	_, mb := getBody(t, s.URL()+"/metrics")
	read := func(name string) int {
		m := regexp.MustCompile(name + `\{[^}]*\} (\d+)`).FindSubmatch(mb)
		if m == nil {
			t.Fatalf("/metrics lacks %s", name)
		}
		v, _ := strconv.Atoi(string(m[1]))
		return v
	}
	q, h := read("vllm:prefix_cache_queries_total"), read("vllm:prefix_cache_hits_total")
	if q != 3*306 || h != 2*256 {
		t.Errorf("queried %d, hit %d; want %d and %d (the 256-token prefix hit by the 2nd and 3rd prompt)", q, h, 3*306, 2*256)
	}
}

func TestParseHBMHidden(t *testing.T) {
	for in, want := range map[string]hbmHidden{"": {gpu: -1}, "1": {1, 0.5}, "0:0.25": {0, 0.25}} {
		if got, err := parseHBMHidden(in, 2); err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"2", "1:1", "1:0", "x", "1:abc", "-1"} {
		if _, err := parseHBMHidden(in, 2); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// vLLM V1's block pool: a held block stays; a freed one stays cached until an allocation reuses it,
// a prompt's tail before its head and the least recently freed first.
func TestPrefixCacheKeepsFreedBlocksUntilReused(t *testing.T) {
	c := newPrefixCache()
	a, b := uniqueBlocks(1, 4), uniqueBlocks(2, 4)
	c.hold(a)
	c.hold(b)
	c.fit(0) // no free block: nothing held is evicted
	if c.lookup(a) != 4 || c.lookup(b) != 4 {
		t.Fatalf("held blocks evicted: %d %d", c.lookup(a), c.lookup(b))
	}
	c.release(a) // a preempted: its 4 blocks are free, and cached
	c.release(b)
	if c.lookup(a) != 4 {
		t.Fatalf("a freed sequence's blocks are gone at once: %d", c.lookup(a))
	}
	c.fit(6) // an allocation took 2 of the 8 free blocks: a's, freed first, tail first
	if c.lookup(a) != 2 || c.lookup(b) != 4 {
		t.Fatalf("after reusing 2 blocks: a keeps %d (want 2, its head), b %d (want 4)", c.lookup(a), c.lookup(b))
	}
	c.hold(a[:2]) // a readmitted: its head leaves the free list
	c.fit(0)
	if c.lookup(a) != 2 || c.lookup(b) != 0 {
		t.Fatalf("a readmitted keeps %d (want 2); b, free, %d (want 0)", c.lookup(a), c.lookup(b))
	}
}

// The case the held-out ladder found: 100 prompts of 32,000 tokens at once on one H100, about 8 of
// which fit in the KV cache. A preempted request finds what it computed, so the engine does not
// thrash: few preemptions, and its throughput near that of 8 at once (no preemption at all).
func TestPreemptedRequestsFindTheirBlocks(t *testing.T) {
	g, _ := catalog.Builtin().LookupGPU("H100")
	mod, _ := catalog.Builtin().LookupModel("Qwen/Qwen3-14B")
	p, err := NewPerf(g, mod, EngineConfig{TP: 1, MaxModelLen: 40960})
	if err != nil {
		t.Fatal(err)
	}
	tokS := func(r VirtualResult, w Workload) float64 {
		return float64(w.Requests*w.Prompt+r.OutputTokens) / r.Duration.Seconds()
	}
	many, few := Workload{Concurrency: 100, Requests: 100, Prompt: 32000, Output: 100}, Workload{Concurrency: 8, Requests: 8, Prompt: 32000, Output: 100}
	rm, rf := RunVirtual(p, many), RunVirtual(p, few)
	if rm.Preemptions == 0 || rm.Preemptions > 50 || tokS(rm, many) < 0.9*tokS(rf, few) {
		t.Fatalf("100 at once: %d preemptions, %.0f tok/s; 8 at once: %.0f tok/s", rm.Preemptions, tokS(rm, many), tokS(rf, few))
	}
}
