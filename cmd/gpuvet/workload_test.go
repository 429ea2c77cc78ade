package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// writeTrace writes a Mooncake-format trace: n requests, one every 1000/rate ms, each opening
// with one of groups shared blocks, then blocks of its own.
func writeTrace(t *testing.T, n int, rate float64, groups int) string {
	t.Helper()
	var b strings.Builder
	next := int64(1000)
	for i := range n {
		in := 300 + (i*397)%1200
		ids := []int64{int64(i % groups)}
		for k := 1; k < (in+511)/512; k++ {
			ids = append(ids, next)
			next++
		}
		idsText := strings.Trim(strings.ReplaceAll(fmt.Sprint(ids), " ", ", "), "[]")
		fmt.Fprintf(&b, `{"timestamp": %g, "input_length": %d, "output_length": %d, "hash_ids": [%s]}`+"\n", float64(i)*1000/rate, in, 5+i%30, idsText)
	}
	p := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// simCounter reads one of the simulator's own /metrics counters.
func simCounter(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(regexp.QuoteMeta(name) + `\{[^}]*\} (\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("/metrics lacks %s", name)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// A Mooncake trace replayed against the simulator keeps the trace's schedule (within 1 % of its
// span at 100 req/s) and its lengths (every prompt counted at the trace's length), and the prefix
// cache's hit rate gpuvet measures is the simulator's own.
func TestBenchReplaysATrace(t *testing.T) {
	if testing.Short() {
		t.Skip("a 5 s replay")
	}
	srv, err := sim.Listen(sim.Config{GPU: "H200", Model: "Qwen/Qwen3-8B", Seed: 3}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "r.json")
	code := execute([]string{"bench", "--url", srv.URL(), "--model", "Qwen/Qwen3-8B", "--workload", "trace",
		"--trace", writeTrace(t, 500, 100, 5), "--out", out})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	l := readLoad(t, out)
	if len(l.Runs) != 1 || l.Runs[0].Replay == nil || l.Config.Profile != "trace" {
		t.Fatalf("runs %d, profile %q", len(l.Runs), l.Config.Profile)
	}
	rp := l.Runs[0].Replay
	t.Logf("replay %+v", *rp)
	if rp.Sent != 500 || rp.PromptsExact != 500 || math.Abs(rp.SpanErrorPct) > 1 || !strings.HasPrefix(l.Runs[0].Workload, "trace ") {
		t.Errorf("replay: %+v, workload %q; want 500 sent, 500 exact, span within 1 %%", *rp, l.Runs[0].Workload)
	}
	pc := l.Server.PrefixCache
	if pc == nil || pc.Expected == nil {
		t.Fatalf("no prefix-cache figures: %+v", l.Server)
	}
	own := simCounter(t, srv.URL(), "vllm:prefix_cache_hits_total") / simCounter(t, srv.URL(), "vllm:prefix_cache_queries_total")
	t.Logf("hit rate measured %.3f, simulator's %.3f, expected %.3f", pc.HitRate, own, *pc.Expected)
	if math.Abs(pc.HitRate-own) > 0.05 || pc.HitRate < 0.1 {
		t.Errorf("measured hit rate %.3f, the simulator's own %.3f: want within 5 points", pc.HitRate, own)
	}
}

// A shared-prefix run reports the hit rate the simulator's own counter holds (within 5 points);
// with the simulator's prefix cache off, it says the hits were expected and not seen (an engine
// finding: exit 1); a bad trace is exit 2, naming its line.
func TestBenchSharedPrefixWithoutCache(t *testing.T) {
	if testing.Short() {
		t.Skip("two 3 s loads")
	}
	t.Parallel()
	on, err := sim.Listen(sim.Config{GPU: "H200", Model: "Qwen/Qwen3-8B", Seed: 3}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer on.Close()
	out := filepath.Join(t.TempDir(), "r.json")
	if code := executeTo([]string{"bench", "--url", on.URL(), "--model", "Qwen/Qwen3-8B", "--workload", "shared-prefix", "--profile", "constant", "--rate", "20",
		"--max-duration", "3s", "--out", out}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("cache on: exit %d", code)
	}
	pc := readLoad(t, out).Server.PrefixCache
	own := simCounter(t, on.URL(), "vllm:prefix_cache_hits_total") / simCounter(t, on.URL(), "vllm:prefix_cache_queries_total")
	if pc == nil || pc.Expected == nil || math.Abs(pc.HitRate-own) > 0.05 || pc.HitRate < 0.5 {
		t.Errorf("cache on: measured %+v, the simulator's own %.3f: want within 5 points", pc, own)
	}
	srv, err := sim.Listen(sim.Config{GPU: "H200", Model: "Qwen/Qwen3-8B", Seed: 3, Engine: sim.EngineConfig{NoPrefixCache: true}}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	args := []string{"bench", "--url", srv.URL(), "--model", "Qwen/Qwen3-8B", "--workload", "shared-prefix", "--profile", "constant", "--rate", "20", "--max-duration", "3s"}
	var stderr bytes.Buffer
	if code := executeTo(args, io.Discard, &stderr); code != exitFailed {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "engine.prefix_cache") || !strings.Contains(stderr.String(), "hits expected and not seen") {
		t.Errorf("stderr lacks the finding:\n%s", stderr.String())
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n{\"timestamp\": 5, \"input_length\": 10}\n"), 0o644)
	stderr.Reset()
	if code := executeTo([]string{"bench", "--url", srv.URL(), "--model", "Qwen/Qwen3-8B", "--workload", "trace", "--trace", bad}, io.Discard, &stderr); code != exitBadUsage {
		t.Errorf("bad trace: exit %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "line 2") {
		t.Errorf("bad trace: %s", stderr.String())
	}
}

// Multi-turn sessions keep their order and history: on each of the concurrent streams a session's
// turns go one after another, each turn's prompt holds the one before whole (it grows by a user
// turn and a reply), and the engine's prefix cache hits what the history shares.
func TestBenchMultiTurnKeepsHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("a 4 s load")
	}
	srv, err := sim.Listen(sim.Config{GPU: "H200", Model: "Qwen/Qwen3-8B", Seed: 3}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	out, recs := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.jsonl")
	code := executeTo([]string{"bench", "--url", srv.URL(), "--model", "Qwen/Qwen3-8B", "--workload", "multi-turn", "--turns", "3",
		"--concurrency", "4", "--prompt-tokens", "200", "--output-tokens", "40", "--max-duration", "4s", "--out", out, "--records", recs}, io.Discard, io.Discard)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	l := readLoad(t, out)
	if l.Config.Profile != "concurrency" || l.Config.Turns != 3 || l.Runs[0].Workload != "multi-turn (3 turns)" {
		t.Fatalf("profile %q, turns %d, workload %q", l.Config.Profile, l.Config.Turns, l.Runs[0].Workload)
	}
	b, err := os.ReadFile(recs)
	if err != nil {
		t.Fatal(err)
	}
	type turn struct{ prompt, sent, end float64 }
	sessions := map[int]map[int]turn{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Index        int     `json:"index"`
			PromptTokens float64 `json:"prompt_tokens"`
			SentMs       float64 `json:"sent_ms"`
			EndMs        float64 `json:"end_ms"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if sessions[r.Index/3] == nil {
			sessions[r.Index/3] = map[int]turn{}
		}
		sessions[r.Index/3][r.Index%3] = turn{r.PromptTokens, r.SentMs, r.EndMs}
	}
	whole := 0
	for s, turns := range sessions {
		for k := 1; k < 3; k++ {
			a, okA := turns[k-1]
			b, okB := turns[k]
			if !okA || !okB {
				continue
			}
			if b.sent < a.end {
				t.Errorf("session %d: turn %d sent at %.0f ms, before turn %d ended at %.0f ms", s, k, b.sent, k-1, a.end)
			}
			if grew := b.prompt - a.prompt; grew < 240 || grew > 260 {
				t.Errorf("session %d: turn %d's prompt %.0f tokens, turn %d's %.0f: want it to grow by a user turn and a reply (240 + template)", s, k, b.prompt, k-1, a.prompt)
			}
		}
		if len(turns) == 3 {
			whole++
		}
	}
	if whole < 4 {
		t.Errorf("%d whole sessions of 3 turns, want at least one per stream", whole)
	}
	pc := l.Server.PrefixCache
	if pc == nil || pc.Expected == nil || pc.HitRate < 0.3 || math.Abs(pc.HitRate-*pc.Expected) > 0.1 {
		t.Errorf("prefix cache %+v", pc)
	}
}

// A reasoning model's answers are timed twice: TTFT at the first token of any kind, TTFO at the
// first output token past the reasoning; the reasoning's time is its tokens' gaps.
func TestBenchTimesReasoningApart(t *testing.T) {
	if testing.Short() {
		t.Skip("a 2 s load")
	}
	srv, err := sim.Listen(sim.Config{GPU: "H200", Model: "Qwen/Qwen3-8B", Seed: 3, ReasoningTokens: 20}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "r.json")
	if code := executeTo([]string{"bench", "--url", srv.URL(), "--model", "Qwen/Qwen3-8B", "--profile", "concurrency", "--concurrency", "2",
		"--output-tokens", "40", "--max-duration", "2s", "--out", out}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	r := readLoad(t, out).Runs[0]
	if r.TTFO == nil || r.Reasoning == nil || r.TTFO.Count != r.TTFT.Count {
		t.Fatalf("no reasoning timing: ttfo %v, reasoning %v, ttft count %d", r.TTFO, r.Reasoning, r.TTFT.Count)
	}
	// 20 reasoning tokens: the first output token comes 20 gaps after the first reasoning one.
	want := 20 * r.ITL.P50
	t.Logf("TTFT p50 %.1f ms, TTFO p50 %.1f ms, reasoning p50 %.1f ms, ITL p50 %.2f ms", r.TTFT.P50, r.TTFO.P50, r.Reasoning.P50, r.ITL.P50)
	if r.Reasoning.P50 < 0.7*want || r.Reasoning.P50 > 1.3*want || r.TTFO.P50 < r.TTFT.P50+0.7*want {
		t.Errorf("reasoning p50 %.1f ms, TTFO p50 %.1f ms, TTFT p50 %.1f ms: want reasoning ≈ 20 gaps (%.1f ms)", r.Reasoning.P50, r.TTFO.P50, r.TTFT.P50, want)
	}
}

// Two loads of one seed against one long-lived engine: the second's prompts are its own (a salt
// per load), so the engine's prefix cache does not skip their prefill.
func TestSecondLoadFindsNothingCached(t *testing.T) {
	if testing.Short() {
		t.Skip("two 1 s loads")
	}
	srv, err := sim.Listen(sim.Config{GPU: "H200", Model: "Qwen/Qwen3-8B", Seed: 3}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for i := range 2 {
		out := filepath.Join(t.TempDir(), "r.json")
		if code := executeTo([]string{"bench", "--url", srv.URL(), "--model", "Qwen/Qwen3-8B", "--profile", "concurrency", "--concurrency", "2",
			"--output-tokens", "8", "--max-duration", "1s", "--out", out}, io.Discard, io.Discard); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if pc := readLoad(t, out).Server.PrefixCache; pc == nil || pc.HitRate > 0.02 {
			t.Errorf("load %d: prefix cache %+v, want no hit", i+1, pc)
		}
	}
}

// A context ladder on a simulated 24 GB GPU (an L4 serving Qwen3-8B) finds its first preempting
// context where the engine's KV-cache size says it is: 4 streams × (8,096 + 32) tokens pass the
// 21,808 the cache holds, 4 × (4,096 + 32) do not.
func TestBenchContextLadderFindsPreemption(t *testing.T) {
	if testing.Short() {
		t.Skip("a ladder of long prompts")
	}
	t.Parallel()
	srv, err := sim.Listen(sim.Config{GPU: "L4", Model: "Qwen/Qwen3-8B", Seed: 3, Engine: sim.EngineConfig{MaxModelLen: 8192}}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "r.json")
	var stderr bytes.Buffer
	if code := executeTo([]string{"bench", "--url", srv.URL(), "--model", "Qwen/Qwen3-8B", "--workload", "long-context", "--concurrency", "4",
		"--prompt-tokens", "4096", "--output-tokens", "32", "--max-duration", "1s", "--min-samples", "4", "--out", out}, io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	l := readLoad(t, out)
	c := l.Context
	if c == nil || len(l.Runs) != 2 {
		t.Fatalf("context %+v, %d runs", c, len(l.Runs))
	}
	t.Logf("%+v", *c)
	if c.KVCapacityTokens == 0 || c.FirstPreempting != 8096 || c.FirstKVBound != 8096 || c.LongestClean != 4096 || c.ExpectedFirstPreempting != c.FirstPreempting {
		t.Errorf("ladder %+v: want the first preempting rung 8096 (the KV arithmetic's), 4096 clean", *c)
	}
	if !strings.Contains(stderr.String(), "served 4096 tokens at 4 streams without preemption; 8096 preempted") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

// Issue 54: two simulated L40S under the long-context ladder, half of gpu 1's memory hidden from
// its engine: gpu 1 runs out of KV cache a rung before its sibling and is flagged for it, on the
// GPU (reset it), and gpu 0 is not.
func TestRunContextFlagsTheGPUWithHiddenHBM(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	code, out, s := runSim(t, "--sim-gpus", "2", "--set", "sim.gpu=L40S", "--set", "sim.hbm_hidden=1", "--set", "engine.max_model_len=8192",
		"--set", "load.workload=long-context", "--set", "load.profile=concurrency", "--set", "load.concurrency=4",
		"--set", "load.prompt_tokens=4096", "--set", "load.max_duration=1s", "--set", "compare.min_samples=4")
	eps := s.Hosts[0].Models[0].Endpoints
	if code != 0 || s.Status != results.StatusFlag || len(eps) != 2 { // a flag exits 0 without --fail-on-flag
		t.Fatalf("exit %d, %d endpoints:\n%s", code, len(eps), out)
	}
	has := func(e results.Endpoint) bool {
		for _, f := range e.Flags {
			if f.Check == "compare.context" {
				return true
			}
		}
		return false
	}
	c0, c1 := eps[0].Load.Context, eps[1].Load.Context
	if has(eps[0]) || !has(eps[1]) || c0 == nil || c1 == nil || c1.FirstKVBound == 0 || c1.LongestClean >= c0.LongestClean {
		t.Errorf("gpu 0 %+v flags %v; gpu 1 %+v flags %v\n%s", c0, eps[0].Flags, c1, eps[1].Flags, out)
	}
	if !strings.Contains(out, "gpu flag · reset the GPU: [compare.context] Qwen/Qwen3-8B on gpu 1") {
		t.Errorf("the finding is not the GPU's:\n%s", out)
	}
}
