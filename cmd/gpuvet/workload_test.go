package main

import (
	"bytes"
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

// With the simulator's prefix cache off, a shared-prefix run says the hits were expected and not
// seen (an engine finding: exit 1); a bad trace is exit 2, naming its line.
func TestBenchSharedPrefixWithoutCache(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3 s load")
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
