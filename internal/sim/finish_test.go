package sim

import (
	"encoding/json"
	"testing"
	"time"
)

// min_tokens equal to max_tokens without ignore_eos: the answer runs to max_tokens, and an engine
// that stops at max_tokens says "length" (vLLM does), never "stop", whatever the natural length.
func TestMinTokensAtMaxTokensFinishesOnLength(t *testing.T) {
	s := start(t, Config{Model: "any/model-name", TTFT: time.Millisecond, ITL: 100 * time.Microsecond, Seed: 1})
	for _, mt := range []int{600, 1000} { // past every natural length (64–511)
		_, out := post(t, s.URL()+"/v1/completions", map[string]any{"prompt": "tell me", "max_tokens": mt, "min_tokens": mt})
		var r struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			}
			Usage map[string]int
		}
		if err := json.Unmarshal(out, &r); err != nil || len(r.Choices) != 1 {
			t.Fatalf("%s: %v", out, err)
		}
		if r.Usage["completion_tokens"] != mt || r.Choices[0].FinishReason != "length" {
			t.Errorf("max_tokens = min_tokens = %d: %d tokens, finish %q; want %d, \"length\"", mt, r.Usage["completion_tokens"], r.Choices[0].FinishReason, mt)
		}
	}
}
