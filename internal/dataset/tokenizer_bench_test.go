package dataset

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
)

// bigTokenizer is a tokenizer.json of real size: ~100k merges trained left to right on 20k random
// words (a Qwen or Llama 3 file has 150k and 280k merges), with Llama 3's split regex.
func bigTokenizer(b *testing.B) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var merges [][2]string
	seen := map[[2]string]bool{}
	for range 20000 {
		left := "Ġ"
		for range 3 + rng.IntN(8) {
			c := string(rune('a' + rng.IntN(26)))
			if m := [2]string{left, c}; !seen[m] {
				seen[m] = true
				merges = append(merges, m)
			}
			left += c
		}
	}
	data := wordsFixtureWith(merges)
	b.Logf("%d merges, %d MB", len(merges), len(data)>>20)
	return data
}

func wordsFixtureWith(merges [][2]string) []byte {
	pre := map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llama3Pattern}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
	}}
	return tokenizerJSON(merges, false, nil, pre, nil, nil)
}

func BenchmarkParseTokenizer(b *testing.B) {
	data := bigTokenizer(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseTokenizer(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode encodes a 4k-word prompt with a fresh word cache each time (the worst case).
func BenchmarkEncode(b *testing.B) {
	tk, err := ParseTokenizer(bigTokenizer(b))
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("the quick brown fox jumps over the lazy dog, 12345 times!\n", 400)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tk.cache = map[string][]int{}
		tk.Encode(text)
	}
}

// BenchmarkCalibrate is the whole local calibration a bench run does before its first request.
func BenchmarkCalibrate(b *testing.B) {
	tk := loadFixture(b, "words-bpe.json")
	for b.Loop() {
		s := &Synthetic{Lengths: Lengths{Mean: 512, Min: 512, Max: 512}, Seed: 1}
		if err := s.Calibrate(context.Background(), tk); err != nil {
			b.Fatal(err)
		}
	}
}
