package dataset

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wordCounter counts a token per space-separated word, plus extra for the whole text (like a BOS that
// the tokenizer does not exclude), and treats words in multi as two tokens.
type wordCounter struct {
	extra int
	multi map[string]bool
	calls int
}

func (w *wordCounter) Count(_ context.Context, text string) (int, error) {
	w.calls++
	n := w.extra
	for _, f := range strings.Fields(text) {
		n++
		if w.multi[f] {
			n++
		}
	}
	return n, nil
}

func TestParseLengths(t *testing.T) {
	good := map[string]Lengths{
		"512":            {512, 0, 512, 512},
		"512,128,64,900": {512, 128, 64, 900},
	}
	for in, want := range good {
		got, err := ParseLengths(in)
		if err != nil || got != want {
			t.Errorf("ParseLengths(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-3", "a", "1,2", "512,1,600,700", "5,1,10,2", "5,-1,1,9"} {
		if _, err := ParseLengths(bad); err == nil {
			t.Errorf("ParseLengths(%q): no error", bad)
		}
	}
}

func TestSyntheticExactAndSeeded(t *testing.T) {
	c := &wordCounter{extra: 1, multi: map[string]bool{"government": true, "energy": true}}
	s := &Synthetic{Lengths: Lengths{Mean: 100, Stdev: 30, Min: 20, Max: 200}, Seed: 7}
	if err := s.Calibrate(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	for _, w := range s.Words {
		if w == "government" || w == "energy" {
			t.Fatalf("multi-token word %q kept", w)
		}
	}
	if s.Offset != 1 || !s.Exact {
		t.Fatalf("offset %d exact %v, want 1 true", s.Offset, s.Exact)
	}
	lengths := map[int]bool{}
	for i := range 50 {
		p := s.Prompt(i)
		n, _ := c.Count(context.Background(), p.Text)
		if n != p.Tokens || n < 20 || n > 200 {
			t.Fatalf("prompt %d: counter says %d tokens, prompt says %d", i, n, p.Tokens)
		}
		lengths[n] = true
		if again := s.Prompt(i); again.Text != p.Text {
			t.Fatalf("prompt %d not deterministic", i)
		}
	}
	if len(lengths) < 10 {
		t.Fatalf("stdev 30 gave only %d distinct lengths", len(lengths))
	}
	if s.Prompt(1).Text == s.Prompt(2).Text {
		t.Fatal("two prompts are identical")
	}
	other := *s
	other.Seed = 8
	if other.Prompt(1).Text == s.Prompt(1).Text {
		t.Fatal("seed does not change prompts")
	}
}

func TestSyntheticSharedPrefix(t *testing.T) {
	s := &Synthetic{Lengths: Lengths{Mean: 40, Min: 40, Max: 40}, Seed: 1, PrefixCount: 2, PrefixTokens: 30}
	p0, p1, p2 := strings.Fields(s.Prompt(0).Text), strings.Fields(s.Prompt(1).Text), strings.Fields(s.Prompt(2).Text)
	if len(p0) != 40 || len(p2) != 40 {
		t.Fatalf("lengths %d %d", len(p0), len(p2))
	}
	if strings.Join(p0[:30], " ") != strings.Join(p2[:30], " ") {
		t.Fatal("prompts 0 and 2 do not share prefix 0")
	}
	if strings.Join(p0[:30], " ") == strings.Join(p1[:30], " ") {
		t.Fatal("prompts 0 and 1 share a prefix across groups")
	}
	if strings.Join(p0[30:], " ") == strings.Join(p2[30:], " ") {
		t.Fatal("suffixes identical")
	}
}

func TestCalibrateRefusesOddTokenizer(t *testing.T) {
	multi := map[string]bool{}
	for _, w := range commonWords {
		multi[w] = true
	}
	s := &Synthetic{Lengths: Lengths{Mean: 10, Min: 10, Max: 10}}
	if err := s.Calibrate(context.Background(), &wordCounter{multi: multi}); err == nil {
		t.Fatal("calibrated against a tokenizer with no single-token words")
	}
}

func TestParseFiles(t *testing.T) {
	jsonl := "{\"prompt\": \"hello there\", \"output_tokens\": 12}\n\n{\"text\": \"second\"}\n"
	f, err := Parse([]byte(jsonl))
	if err != nil || len(f.Prompts) != 2 || f.Prompts[0].OutputTokens != 12 || f.Prompts[1].Text != "second" {
		t.Fatalf("jsonl: %+v %v", f, err)
	}
	if f.Prompt(3).Text != "second" {
		t.Fatal("Prompt does not cycle")
	}
	share := `[{"conversations":[{"from":"gpt","value":"x"},{"from":"human","value":"What is HBM?"},{"from":"gpt","value":"memory"}]},{"conversations":[]}]`
	f, err = Parse([]byte(share))
	if err != nil || len(f.Prompts) != 1 || f.Prompts[0].Text != "What is HBM?" {
		t.Fatalf("sharegpt: %+v %v", f, err)
	}
	bad := map[string]string{
		"line 2":          "{\"prompt\":\"a\"}\n{oops\n",
		"no \"prompt\"":   "{\"output_tokens\": 3}\n",
		"output_tokens":   "{\"prompt\":\"a\",\"output_tokens\":-1}\n",
		"no prompts":      "\n\n",
		"ShareGPT JSON":   "[{\"conversations\": 3}]",
		"none with a non": "[{\"conversations\":[{\"from\":\"gpt\",\"value\":\"x\"}]}]",
	}
	for want, in := range bad {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error %v, want mention of %q", in, err, want)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "p.jsonl")
	os.WriteFile(p, []byte(jsonl), 0o644)
	if f, err := Load(p); err != nil || f.Describe() != "p.jsonl" {
		t.Fatalf("Load: %v %v", f, err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file: no error")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("{\"prompt\": \"hi\", \"output_tokens\": 3}\n"))
	f.Add([]byte(`[{"conversations":[{"from":"human","value":"q"}]}]`))
	f.Add([]byte("[\n"))
	f.Add([]byte("{\"prompt\": null}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err == nil && (file == nil || len(file.Prompts) == 0) {
			t.Fatal("no error and no prompts")
		}
		if err == nil {
			for _, p := range file.Prompts {
				if p.Text == "" || p.OutputTokens < 0 {
					t.Fatalf("bad prompt %+v accepted", p)
				}
			}
		}
	})
}

func TestCalibrateLinear(t *testing.T) {
	// Every word costs 1.5 tokens on average (every other one is two tokens), plus 5 of template.
	multi := map[string]bool{}
	for i, w := range commonWords {
		if i%2 == 0 {
			multi[w] = true
		}
	}
	c := &wordCounter{extra: 5, multi: multi}
	s := &Synthetic{Lengths: Lengths{Mean: 300, Min: 300, Max: 300}, Seed: 3}
	if err := s.CalibrateLinear(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if c.calls != 2 || s.Exact || s.PerWord < 1.3 || s.PerWord > 1.7 {
		t.Fatalf("calls %d exact %v perWord %v", c.calls, s.Exact, s.PerWord)
	}
	n, _ := c.Count(context.Background(), s.Prompt(0).Text)
	if n < 270 || n > 330 {
		t.Fatalf("usage-calibrated prompt of 300 tokens counted %d", n)
	}
	if s.Prompt(0).Tokens != 0 {
		t.Fatal("approximate prompt claims an exact count")
	}
	if err := (&Synthetic{Lengths: s.Lengths}).CalibrateLinear(context.Background(), &wordCounter{}); err != nil {
		t.Fatalf("plain words: %v", err)
	}
}
