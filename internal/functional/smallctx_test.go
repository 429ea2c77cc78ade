package functional

import (
	"context"
	"testing"
)

// A server with a small context (max_model_len 200: a tiny test model) still gets four prompts of
// different lengths: each was clipped to max_model_len/3, so the last two were the same length and
// concurrent_isolation failed a healthy server on "prompt_tokens not strictly increasing".
func TestConcurrentIsolationWithASmallContext(t *testing.T) {
	srv := fakeServer("")
	defer srv.Close()
	r := Run(context.Background(), Options{URL: srv.URL, Model: "m", MaxModelLen: 200})
	for _, ft := range r.Tests {
		if ft.Name == ConcurrentIsolation && !ft.Passed {
			t.Errorf("%s: %s", ft.Name, ft.Detail)
		}
	}
}
