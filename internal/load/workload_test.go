package load

import (
	"strings"
	"testing"

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
	if c.LongestClean != 2048 || c.FirstPreempting != 4096 || c.ExpectedFirstPreempting != 4096 {
		t.Errorf("%+v", *c)
	}
	runs[1].Preemptions = nil
	if c := contextSummary(runs, 8, 64, 0); c.Note == "" || c.LongestClean != 0 || c.ExpectedFirstPreempting != 0 {
		t.Errorf("without counters: %+v", *c)
	}
}
