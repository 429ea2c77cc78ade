package dataset

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// The tokenizer.json fixtures in testdata are made here (go test -run TestTokenizerFixtures -update)
// and checked against what this code makes, so a hand edit of a fixture does not go unnoticed.
var update = flag.Bool("update", false, "rewrite testdata tokenizer fixtures")

const (
	gpt2Pattern   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// tokenizerJSON builds a byte-level BPE tokenizer.json: ids 0-255 are the byte symbols (id = byte
// value), each merge adds the next id, then the added tokens follow.
func tokenizerJSON(merges [][2]string, stringMerges bool, normalizer, pre, post any, added []string) []byte {
	vocab := map[string]int{}
	for b, r := range byteChar {
		vocab[string(r)] = b
	}
	var ms []any
	for _, m := range merges {
		if _, ok := vocab[m[0]+m[1]]; !ok {
			vocab[m[0]+m[1]] = len(vocab)
		}
		if stringMerges {
			ms = append(ms, m[0]+" "+m[1])
		} else {
			ms = append(ms, []string{m[0], m[1]})
		}
	}
	var at []any
	for _, a := range added {
		at = append(at, map[string]any{"id": len(vocab) + len(at), "content": a, "single_word": false,
			"lstrip": false, "rstrip": false, "normalized": false, "special": true})
	}
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": at,
		"normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post,
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": ms},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as the hub's files are written: "<|endoftext|>", not "\u003c…"
	enc.SetIndent("", " ")
	if err := enc.Encode(doc); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// gpt2Fixture: GPT-2's layout (ByteLevel pre-tokenizer with its own regex, "a b" merges).
func gpt2Fixture() []byte {
	merges := [][2]string{
		{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"Ġ", "Ġ"}, {"l", "l"}, {"e", "ll"}, {"h", "ell"},
		{"hell", "o"}, {"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"}, {"l", "d"}, {"Ġwor", "ld"},
	}
	pre := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	post := map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true}
	return tokenizerJSON(merges, true, nil, pre, post, []string{"<|endoftext|>"})
}

// llama3Fixture: Llama 3's layout (a Split regex then ByteLevel without regex, pair merges, a BOS added
// by TemplateProcessing), with Qwen's NFC normalizer.
func llama3Fixture() []byte {
	merges := [][2]string{{"1", "2"}, {"Ċ", "Ċ"}, {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}}
	pre := map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llama3Pattern}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
	}}
	post := map[string]any{"type": "Sequence", "processors": []any{
		map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		map[string]any{"type": "TemplateProcessing",
			"single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "<|begin_of_text|>", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
			},
			"pair":           []any{},
			"special_tokens": map[string]any{},
		},
	}}
	return tokenizerJSON(merges, false, map[string]any{"type": "NFC"}, pre, post,
		[]string{"<|begin_of_text|>", "<|im_start|>", "<|im_end|>"})
}

// wordsFixture: a tokenizer trained the simplest way on the first 120 common words after a space
// (each word's letters merged left to right onto "Ġ"), so those words are one token each, the rest of
// the list mostly several, and a bare "the" (the start of a prompt) three.
func wordsFixture() []byte {
	var merges [][2]string
	seen := map[[2]string]bool{}
	for _, w := range commonWords[:120] {
		left := "Ġ"
		for _, r := range w {
			m := [2]string{left, string(r)}
			if !seen[m] {
				seen[m] = true
				merges = append(merges, m)
			}
			left += string(r)
		}
	}
	pre := map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llama3Pattern}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
	}}
	return tokenizerJSON(merges, false, nil, pre, nil, []string{"<|im_start|>", "<|im_end|>"})
}

var fixtures = map[string]func() []byte{
	"gpt2-tiny.json":   gpt2Fixture,
	"llama3-tiny.json": llama3Fixture,
	"words-bpe.json":   wordsFixture,
}

func TestTokenizerFixtures(t *testing.T) {
	for name, make := range fixtures {
		p := filepath.Join("testdata", name)
		want := make()
		if *update {
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%v (run go test -run TestTokenizerFixtures -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what wordsFixture & co. make: run go test -run TestTokenizerFixtures -update", p)
		}
	}
}
