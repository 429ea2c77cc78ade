package dataset

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func loadFixture(t testing.TB, name string) *Tokenizer {
	t.Helper()
	tk, err := LoadTokenizer(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// The expectations are worked by hand from the fixtures' merges (ids: bytes 0-255 by value, then one
// id per merge in order, then the added tokens); the comment on each says how.
func TestTokenizerEncodeGPT2(t *testing.T) {
	tk := loadFixture(t, "gpt2-tiny.json")
	const (
		Gt, he, Gthe, GG, ll = 256, 257, 258, 259, 260
		Gworld, eot          = 268, 269
	)
	cases := []struct {
		in   string
		want []int
		why  string
	}{
		// "h e" (rank 1) fires before "l l" (4), which blocks "e ll"/"h ell"/"hell o": he·ll·o.
		{"hello world", []int{he, ll, 'o', Gworld}, "rank order"},
		// "the" has no "t he" merge; "  the" splits as " " + " the" (\s+(?!\S)).
		{"the  the", []int{'t', he, 32, Gthe}, "lookahead split"},
		// Three spaces before a word: "  " (one piece, merged ĠĠ) then " y".
		{"x   y", []int{'x', GG, 32, 'y'}, "whitespace run"},
		{"x  ", []int{'x', GG}, "trailing spaces"},
		{"a<|endoftext|>b", []int{'a', eot, 'b'}, "added token"},
		{"it's", []int{'i', 't', '\'', 's'}, "contraction"},
		{"é\n", []int{0xC3, 0xA9, '\n'}, "UTF-8 bytes"},
		{"", nil, "empty"},
	}
	for _, c := range cases {
		got := tk.Encode(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", c.why, c.in, got, c.want)
		}
		back, err := tk.Decode(got)
		if err != nil || back != c.in {
			t.Errorf("%s: Decode(Encode(%q)) = %q, %v", c.why, c.in, back, err)
		}
	}
	if n, _ := tk.Count(context.Background(), "hello world"); n != 4 || tk.SpecialTokens() != 0 {
		t.Errorf("Count = %d, SpecialTokens = %d; want 4 and 0 (GPT-2 adds no BOS)", n, tk.SpecialTokens())
	}
}

func TestTokenizerEncodeLlama3(t *testing.T) {
	tk := loadFixture(t, "llama3-tiny.json")
	const (
		twelve, CC, Gthe = 256, 257, 260
		bos, imStart     = 261, 262
		imEnd            = 263
	)
	cases := []struct {
		in   string
		want []int
		why  string
	}{
		// \p{N}{1,3} splits "1212" as "121" + "2": 12·1·2, not 12·12.
		{"1212", []int{twelve, '1', '2'}, "digits in threes"},
		// \s*[\r\n]+ keeps "\n\n" whole, so "Ċ Ċ" merges (GPT-2's regex would split it).
		{"a\n\nb", []int{'a', CC, 'b'}, "newlines"},
		{"<|im_start|>user\nhi<|im_end|>", []int{imStart, 'u', 's', 'e', 'r', '\n', 'h', 'i', imEnd}, "chat markup"},
		{" the", []int{Gthe}, "space word"},
		// NFC turns e + U+0301 into é (C3 A9) before the bytes are mapped.
		{"e\u0301", []int{0xC3, 0xA9}, "NFC"},
		{"<|begin_of_text|>", []int{bos}, "BOS written out"},
	}
	for _, c := range cases {
		if got := tk.Encode(c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", c.why, c.in, got, c.want)
		}
	}
	// The TemplateProcessing post_processor adds the BOS: Count is one more than Encode.
	if n, _ := tk.Count(context.Background(), " the"); n != 2 || tk.SpecialTokens() != 1 {
		t.Errorf("Count(\" the\") = %d, SpecialTokens = %d; want 2 and 1", n, tk.SpecialTokens())
	}
}

func TestTokenizerMalformed(t *testing.T) {
	type doc = map[string]any
	cases := []struct {
		edit func(d doc)
		want string
	}{
		{func(d doc) { d["model"] = 3 }, "not a tokenizer.json"},
		{func(d doc) { delete(d, "model") }, "model: missing"},
		{func(d doc) { d["model"].(doc)["type"] = "WordPiece" }, `model.type "WordPiece"`},
		{func(d doc) { d["model"].(doc)["vocab"] = doc{} }, "model.vocab: missing or empty"},
		{func(d doc) { delete(d["model"].(doc)["vocab"].(doc), "Ġ") }, "model.vocab: no token for byte 0x20"},
		{func(d doc) { d["model"].(doc)["vocab"].(doc)["Ġt"] = 32 }, `model.vocab: id 32 is given to both "Ġ" and "Ġt"`},
		{func(d doc) { d["model"].(doc)["merges"].([]any)[2] = "Ġthe" }, "model.merges[2]"},
		{func(d doc) { d["model"].(doc)["merges"].([]any)[6] = "h zz" }, "model.merges[6]"},
		{func(d doc) { d["model"].(doc)["merges"].([]any)[1] = []any{"h"} }, "model.merges[1]"},
		{func(d doc) { d["model"].(doc)["continuing_subword_prefix"] = "##" }, "model.continuing_subword_prefix"},
		{func(d doc) { d["added_tokens"].([]any)[0].(doc)["content"] = "" }, "added_tokens[0]"},
		{func(d doc) { delete(d["added_tokens"].([]any)[0].(doc), "id") }, "added_tokens[0]"},
		{func(d doc) { d["pre_tokenizer"].(doc)["type"] = "Metaspace" }, `pre_tokenizer.type "Metaspace"`},
		{func(d doc) { d["normalizer"] = doc{"type": "Lowercase"} }, `normalizer.type "Lowercase"`},
		{func(d doc) {
			d["pre_tokenizer"] = doc{"type": "Sequence", "pretokenizers": []any{
				doc{"type": "Split", "pattern": doc{"Regex": "(x"}, "behavior": "Isolated"}, d["pre_tokenizer"]}}
		}, "pre_tokenizer.pretokenizers[0].pattern"},
		{func(d doc) {
			d["pre_tokenizer"] = doc{"type": "Split", "pattern": doc{"Regex": "x"}, "behavior": "Nope"}
		}, `pre_tokenizer.behavior "Nope"`},
		{func(d doc) {
			d["pre_tokenizer"] = doc{"type": "Split", "pattern": doc{"String": " "}, "behavior": "Removed"}
		}, "pre_tokenizer: no ByteLevel step"},
		{func(d doc) { d["post_processor"] = doc{"type": "Weird"} }, `post_processor.type "Weird"`},
	}
	for i, c := range cases {
		var d doc
		if err := json.Unmarshal(gpt2Fixture(), &d); err != nil {
			t.Fatal(err)
		}
		c.edit(d)
		b, _ := json.Marshal(d)
		if _, err := ParseTokenizer(b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: ParseTokenizer = %v; want an error containing %q", i, err, c.want)
		}
	}
	if _, err := ParseTokenizer(gpt2Fixture()); err != nil {
		t.Fatalf("the unedited fixture: %v", err)
	}
}

// The synthetic prompts built with a tokenizer.json count exactly as asked, by that tokenizer.
func TestSyntheticExactWithTokenizer(t *testing.T) {
	tk := loadFixture(t, "words-bpe.json")
	ctx := context.Background()
	for _, s := range []*Synthetic{
		{Lengths: Lengths{Mean: 300, Stdev: 80, Min: 20, Max: 600}, Seed: 7},
		{Lengths: Lengths{Mean: 64, Min: 64, Max: 64}, Seed: 3, PrefixCount: 2, PrefixTokens: 32},
	} {
		if err := s.Calibrate(ctx, tk); err != nil {
			t.Fatal(err)
		}
		if !s.Exact || len(s.Words) < 100 || len(s.Words) >= len(commonWords) {
			t.Fatalf("Calibrate: exact %v with %d words; want exact with the ~120 trained words", s.Exact, len(s.Words))
		}
		for _, w := range s.Words {
			if ids := tk.Encode(" " + w); len(ids) != 1 {
				t.Fatalf("kept %q, which is %d tokens after a space", w, len(ids))
			}
		}
		// A bare "the" is three tokens here (t·h·e), against one word: the offset is 2.
		if s.Offset != 2 {
			t.Errorf("Offset = %d, want 2", s.Offset)
		}
		for i := range 40 {
			p := s.Prompt(i)
			if n, _ := tk.Count(ctx, p.Text); n != s.Length(i) || p.Tokens != n {
				t.Fatalf("prompt %d: %d tokens by the tokenizer, Tokens %d, want %d", i, n, p.Tokens, s.Length(i))
			}
		}
	}
}

func TestLoadTokenizerMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope.json")
	if _, err := LoadTokenizer(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("LoadTokenizer(missing) = %v; want an error naming the file", err)
	}
}

func FuzzParseTokenizer(f *testing.F) {
	for name := range fixtures {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "hello  world\n\n1234 it's é<|im_end|>")
	}
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[["a","a"]]}}`), "aa")
	f.Add([]byte(`{"added_tokens":[{"id":1}]}`), "")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		tk, err := ParseTokenizer(data)
		if err != nil {
			return
		}
		ids := tk.Encode(text)
		back, err := tk.Decode(ids)
		if err != nil {
			t.Fatalf("Decode(Encode(%q)): %v", text, err)
		}
		// Without a normalizer, a prefix space or removed splits, byte-level BPE loses nothing (invalid UTF-8 becomes U+FFFD first).
		lossless := tk.normal == nil && !tk.prefix
		for _, sp := range tk.pre {
			lossless = lossless && sp.behavior != "Removed"
		}
		if lossless && back != strings.ToValidUTF8(text, "\uFFFD") {
			t.Fatalf("Decode(Encode(%q)) = %q", text, back)
		}
	})
}

// templateCounter is a server that counts with the local tokenizer plus a fixed chat template.
type templateCounter struct {
	tk    *Tokenizer
	extra int
	calls int
}

func (c *templateCounter) Count(ctx context.Context, text string) (int, error) {
	c.calls++
	n, err := c.tk.Count(ctx, text)
	return n + c.extra, err
}

func TestRebaseAddsTheServersTemplate(t *testing.T) {
	tk := loadFixture(t, "words-bpe.json")
	ctx := context.Background()
	s := &Synthetic{Lengths: Lengths{Mean: 200, Stdev: 50, Min: 40, Max: 400}, Seed: 5}
	server := &templateCounter{tk: tk, extra: 11}
	if _, err := s.Rebase(ctx, server); err == nil {
		t.Fatal("Rebase before Calibrate: want an error")
	}
	if err := s.Calibrate(ctx, tk); err != nil {
		t.Fatal(err)
	}
	d, err := s.Rebase(ctx, server)
	if err != nil || d != 11 || server.calls != 3 {
		t.Fatalf("Rebase = %d, %v after %d calls; want 11 from 3 calls", d, err, server.calls)
	}
	for i := range 30 {
		p := s.Prompt(i)
		if n, _ := server.Count(ctx, p.Text); n != s.Length(i) || p.Tokens != n {
			t.Fatalf("prompt %d: the server counts %d, Tokens %d, want %d", i, n, p.Tokens, s.Length(i))
		}
	}
	// A server whose count is not the local one plus a constant is refused, and Offset is untouched.
	s2 := &Synthetic{Lengths: Lengths{Mean: 200, Stdev: 50, Min: 40, Max: 400}, Seed: 5}
	if err := s2.Calibrate(ctx, tk); err != nil {
		t.Fatal(err)
	}
	off := s2.Offset
	if _, err := s2.Rebase(ctx, &wordCounter{multi: map[string]bool{"the": true}}); !errors.Is(err, ErrMismatch) || s2.Offset != off {
		t.Errorf("Rebase with a mismatched server = %v, offset %d (was %d); want an error and no change", err, s2.Offset, off)
	}
}

// GPT-2's own tokenizer.json lists the 256 byte symbols first, in the order of their runes ("!" 0,
// "A" 32, "a" 64; "Ġ" (space) 220 and "Ċ" (newline) 198 are its well-known ids), writes
// continuing_subword_prefix and end_of_word_suffix as "", and adds "<|endoftext|>" as 50256. A vocab
// laid out that way must give those ids.
func TestTokenizerGPT2IDLayout(t *testing.T) {
	var syms []rune
	for _, r := range byteChar {
		syms = append(syms, r)
	}
	slices.Sort(syms)
	vocab := map[string]int{}
	for i, r := range syms {
		vocab[string(r)] = i
	}
	doc := map[string]any{
		"added_tokens":  []any{map[string]any{"id": 50256, "content": "<|endoftext|>", "special": true}},
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "continuing_subword_prefix": "", "end_of_word_suffix": "",
			"vocab": vocab, "merges": []any{}},
	}
	b, _ := json.Marshal(doc)
	tk, err := ParseTokenizer(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tk.Encode("!Aa \n<|endoftext|>"), []int{0, 32, 64, 220, 198, 50256}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want GPT-2's ids %v", got, want)
	}
}

// add_prefix_space (RoBERTa's layout) puts a space before each piece it gets, so "the" encodes as
// " the" does, on each side of an added token too.
func TestTokenizerAddPrefixSpace(t *testing.T) {
	var d map[string]any
	if err := json.Unmarshal(gpt2Fixture(), &d); err != nil {
		t.Fatal(err)
	}
	d["pre_tokenizer"].(map[string]any)["add_prefix_space"] = true
	b, _ := json.Marshal(d)
	tk, err := ParseTokenizer(b)
	if err != nil {
		t.Fatal(err)
	}
	const Gthe, eot = 258, 269
	for in, want := range map[string][]int{
		"the":               {Gthe},
		" the":              {Gthe},
		"a<|endoftext|>the": {32, 'a', eot, Gthe},
	} {
		if got := tk.Encode(in); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v", in, got, want)
		}
	}
}

// gpt2-subset.json holds the real GPT-2 merges (from its 50,000-line merges.txt) that apply, or compete
// to apply, on the sentences below, at their real ranks and ids (GPT-2's ids are the 256 bytes, then
// one per merge in rank order, then <|endoftext|> 50256). The expected ids are GPT-2's published
// encodings of these sentences (Hugging Face transformers' examples and tests).
func TestTokenizerRealGPT2Encodings(t *testing.T) {
	tk := loadFixture(t, "gpt2-subset.json")
	for in, want := range map[string][]int{
		"Hello world":           {15496, 995},
		"Hello, my dog is cute": {15496, 11, 616, 3290, 318, 13779},
		"The quick brown fox jumps over the lazy dog.": {464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13},
		"Hello<|endoftext|>world":                      {15496, 50256, 6894},
	} {
		if got := tk.Encode(in); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want GPT-2's %v", in, got, want)
		}
	}
}
