package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

func TestParseKVCapacity(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{`vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="27315"} 1.0`, 27315 * 16},
		{"# HELP x\nvllm:cache_config_info{num_gpu_blocks=\"10\",block_size=\"32\"} 1", 320},
		{`vllm:cache_config_info{kv_block_size="16",num_gpu_blocks="10"} 1`, 0}, // not the label
		{`vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1`, 0},
		{`vllm:cache_config_info{block_size="16",num_gpu_blocks="-5"} 1`, 0},
		{`vllm:cache_config_info{block_size="99999999999",num_gpu_blocks="99999999999"} 1`, 0},
		{`sglang:token_usage 0.5`, 0},
		// gpuvet's transformers front, through the engine table's CacheInfo.
		{`transformers_cb:cache_config_info{block_size="256",num_gpu_blocks="700"} 1`, 700 * 256},
		{`transformers_cb:cache_config_infox{block_size="256",num_gpu_blocks="700"} 1`, 0},
	} {
		if got := parseKVCapacity(strings.NewReader(c.in)); got != c.want {
			t.Errorf("%q: %d, want %d", c.in, got, c.want)
		}
	}
}

func FuzzParseKVCapacity(f *testing.F) {
	f.Add(`vllm:cache_config_info{block_size="16",num_gpu_blocks="27315"} 1.0`)
	f.Fuzz(func(t *testing.T, s string) {
		if n := parseKVCapacity(strings.NewReader(s)); n < 0 || n > 1<<40 {
			t.Fatalf("capacity %d", n)
		}
	})
}

func TestContextLadder(t *testing.T) {
	if got := contextRungs(512, 3000); len(got) != 4 || got[0] != 512 || got[2] != 2048 || got[3] != 3000 {
		t.Errorf("rungs %v, want 512 1024 2048 3000", got)
	}
	p := func(v float64) *float64 { return &v }
	runs := []results.Run{{ContextTokens: 1024, Preemptions: p(0)}, {ContextTokens: 2048, Preemptions: p(0)}, {ContextTokens: 4096, Preemptions: p(3)}, {ContextTokens: 8192, Preemptions: p(9)}}
	c := contextSummary(runs, 8, 64, 30000)
	// 8 × (4096 + 64) = 33,280 passes 30,000; 8 × (2048 + 64) does not.
	if c.LongestClean != 2048 || c.FirstKVBound != 4096 || c.FirstPreempting != 4096 || c.ExpectedFirstPreempting != 4096 {
		t.Errorf("%+v", *c)
	}
	// An engine that holds requests back instead (the H200's transformers at 8192 with half its
	// HBM held): the rung is out of KV cache, not preempting; a batch cap's hold at a cache half
	// empty, or a brief hold, is not.
	held := []results.Run{{ContextTokens: 2048, Preemptions: p(0), HeldShare: p(0.7), KVUsageMax: p(0.43)},
		{ContextTokens: 4096, Preemptions: p(0), HeldShare: p(0.1), KVUsageMax: p(0.81)},
		{ContextTokens: 8192, Preemptions: p(0), HeldShare: p(0.75), KVUsageMax: p(0.93)}}
	if c := contextSummary(held, 4, 32, 21504); c.LongestClean != 4096 || c.FirstKVBound != 8192 || c.FirstPreempting != 0 || c.ExpectedFirstPreempting != 8192 {
		t.Errorf("held back: %+v", *c)
	}
	runs[1].Preemptions = nil
	if c := contextSummary(runs, 8, 64, 0); c.Note == "" || c.LongestClean != 0 || c.ExpectedFirstPreempting != 0 {
		t.Errorf("without counters: %+v", *c)
	}
}

// A workload's settings are checked before any request, each error naming its flag.
func TestValidateWorkload(t *testing.T) {
	trace := t.TempDir() + "/t.jsonl"
	if err := os.WriteFile(trace, []byte("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n{\"timestamp\": 600000, \"input_length\": 10, \"output_length\": 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := Defaults(results.LoadConfig{})
	with := func(f func(*results.LoadConfig)) results.LoadConfig { c := base; f(&c); return workloadDefaults(c) }
	for _, c := range []struct {
		cfg  results.LoadConfig
		want string
	}{
		{with(func(c *results.LoadConfig) { c.Workload = "nope" }), "--workload \"nope\""},
		{with(func(c *results.LoadConfig) { c.Workload = WorkloadTrace }), "--workload trace: give the trace with --trace FILE"},
		{with(func(c *results.LoadConfig) { c.Trace = trace }), "only --workload trace reads a trace"},
		{with(func(c *results.LoadConfig) { c.Profile = kindTrace }), "--profile trace replays"},
		{with(func(c *results.LoadConfig) { c.Workload, c.Trace, c.TraceSpeed = WorkloadTrace, trace, 1e-6 }), "would last 166667 h"},
		{with(func(c *results.LoadConfig) { c.Workload = WorkloadMultiTurn }), "--workload multi-turn sends each session's turns in order"},
		{with(func(c *results.LoadConfig) { c.Workload, c.Profile = WorkloadLongContext, kindConstant }), "--workload long-context climbs"},
		{with(func(c *results.LoadConfig) { c.Turns = 3 }), "--turns 3"},
		// A session's last request carries every turn before it: 256 turns of 2^22-token prompts
		// would build a prompt of 10^9 tokens (gigabytes of text) before sending it.
		{with(func(c *results.LoadConfig) {
			c.Workload, c.Profile, c.Concurrency, c.Turns, c.PromptTokens, c.PromptMin, c.PromptMax = WorkloadMultiTurn, kindConcurrency, 1, 256, 1<<22, 1<<22, 1<<22
		}), "--turns 256"},
		{with(func(c *results.LoadConfig) { c.ContextMax = 4096 }), "--context-max 4096"},
		{with(func(c *results.LoadConfig) { c.Workload, c.PrefixCount = WorkloadSynthetic, 4 }), "give --workload shared-prefix"},
	} {
		if err := validateWorkload(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg.Workload, err, c.want)
		}
	}
	ok := with(func(c *results.LoadConfig) { c.Workload, c.Trace, c.Profile = WorkloadTrace, trace, kindTrace })
	if err := validateWorkload(ok); err != nil {
		t.Errorf("a good trace: %v", err)
	}
	if err := CheckWorkload(ok, 8); err == nil || !strings.Contains(err.Error(), "over the engine's max_model_len 8") {
		t.Errorf("a trace over max_model_len: %v", err)
	}
}

// TestScraperKeepsRecentSamples: past maxServerSamples (an hour at 1 Hz) the scraper thins its older
// samples instead of overwriting the last one: a rung after the first hour still reads its own
// window's queue and KV-cache use (the knee's queue median, a context rung's KV pressure), where it
// read one instant (or nothing) before.
func TestScraperKeepsRecentSamples(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("vllm:num_requests_running 4\nvllm:num_requests_waiting 2\nvllm:kv_cache_usage_perc 0.5\n"))
	}))
	defer srv.Close()
	s := &scraper{url: srv.URL, hc: srv.Client(), every: time.Second, epoch: time.Now()}
	ctx := context.Background()
	for range maxServerSamples {
		if err := s.once(ctx); err != nil {
			t.Fatal(err)
		}
	}
	from := time.Since(s.epoch).Seconds()
	for range 50 {
		s.once(ctx)
	}
	to := time.Since(s.epoch).Seconds()
	n := 0
	for _, x := range s.result().Samples {
		if x.T >= from && x.T <= to {
			n++
		}
	}
	if n != 50 || len(s.result().Samples) > maxServerSamples {
		t.Fatalf("%d samples in the last window of 50 scrapes (%d kept)", n, len(s.result().Samples))
	}
	if _, held := s.kvPressure(from, to, 8); held != 1 {
		t.Fatalf("held share %v over the last window, want 1", held)
	}
}
