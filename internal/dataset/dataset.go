// Package dataset makes the prompts a load run sends: synthetic prompts of exact token counts (by the
// model's own tokenizer, reached through a Counter), prompts from a JSONL file or a ShareGPT file, and
// shared-prefix prompts. Everything is seeded: the same Spec and seed give the same prompts, in the same
// order, whatever the concurrency.
package dataset

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Counter counts the tokens of a text as the model's tokenizer does, special tokens (BOS) excluded.
type Counter interface {
	Count(ctx context.Context, text string) (int, error)
}

// Prompt is one request's input.
type Prompt struct {
	Text string
	// Tokens is the prompt's token count when known exactly (0: unknown; the server's usage tells).
	Tokens int
	// OutputTokens is the output length this prompt asks for (0: the run's default).
	OutputTokens int
	// History is the conversation before Text, oldest first: user and assistant turns taking
	// turns, the first a user's (a multi-turn session's later turns; nil: a single turn).
	History []string
}

// Source yields prompts by request index. Prompt(i) is deterministic and safe for concurrent use.
type Source interface {
	Prompt(i int) Prompt
	// Describe says where prompts come from, for the results ("synthetic", a file name).
	Describe() string
}

// Lengths is a prompt-length distribution in tokens: Mean with optional Stdev, clamped to [Min, Max].
type Lengths struct {
	Mean, Stdev, Min, Max int
}

// ParseLengths reads "512" or "mean,stdev,min,max" (e.g. "512,128,64,1024").
func ParseLengths(s string) (Lengths, error) {
	parts := strings.Split(s, ",")
	var v [4]int
	if len(parts) != 1 && len(parts) != 4 {
		return Lengths{}, fmt.Errorf("prompt tokens %q: want N or mean,stdev,min,max (e.g. 512 or 512,128,64,1024)", s)
	}
	for i, p := range parts {
		if _, err := fmt.Sscan(strings.TrimSpace(p), &v[i]); err != nil {
			return Lengths{}, fmt.Errorf("prompt tokens %q: field %d (%q) is not an integer", s, i+1, p)
		}
	}
	l := Lengths{Mean: v[0], Min: v[0], Max: v[0]}
	if len(parts) == 4 {
		l = Lengths{Mean: v[0], Stdev: v[1], Min: v[2], Max: v[3]}
	}
	return l, l.Validate()
}

// Validate checks the distribution makes sense.
func (l Lengths) Validate() error {
	switch {
	case l.Mean < 1:
		return fmt.Errorf("prompt tokens: mean %d, want ≥ 1", l.Mean)
	case l.Stdev < 0:
		return fmt.Errorf("prompt tokens: stdev %d, want ≥ 0", l.Stdev)
	case l.Min < 1 || l.Max < l.Min:
		return fmt.Errorf("prompt tokens: min %d max %d, want 1 ≤ min ≤ max", l.Min, l.Max)
	case l.Mean < l.Min || l.Mean > l.Max:
		return fmt.Errorf("prompt tokens: mean %d outside [min %d, max %d]", l.Mean, l.Min, l.Max)
	}
	return nil
}

// Synthetic makes prompts of random words, each word one token of the model's tokenizer, so a prompt of
// n words is n tokens (Calibrate checks this and measures any fixed offset).
type Synthetic struct {
	Lengths Lengths
	Seed    uint64
	// PrefixCount × PrefixTokens: when both > 0, prompt i starts with shared prefix i % PrefixCount of
	// PrefixTokens tokens (counted in its length), to exercise prefix caching.
	PrefixCount, PrefixTokens int
	// Words is the one-token vocabulary (from Calibrate); nil uses the built-in list unchecked.
	Words []string
	// Offset is tokens(text) − words(text) as measured by Calibrate (usually 0): removed from the count.
	Offset int
	// Exact is true when Words and Offset were confirmed with the model's tokenizer.
	Exact bool
	// PerWord is the tokens per word fitted by CalibrateLinear (0: one token per word).
	PerWord float64
	// Salt is mixed into every prompt's words, never its length: a load draws its own, so that an
	// engine's prefix cache never holds a load's prompts from an earlier load with the same seed
	// (a second run against a long-lived server would otherwise skip its prefills). 0: the seed's.
	Salt uint64
}

// wordSeed is the seed of a stream of prompt words: the seed, the load's salt and what the words
// are for.
func (s *Synthetic) wordSeed(tag uint64) uint64 { return s.Seed ^ s.Salt ^ tag }

// Describe implements Source.
func (s *Synthetic) Describe() string {
	if s.PrefixCount > 0 && s.PrefixTokens > 0 {
		return fmt.Sprintf("synthetic (shared prefix %d×%d)", s.PrefixCount, s.PrefixTokens)
	}
	return "synthetic"
}

func (s *Synthetic) words() []string {
	if len(s.Words) > 0 {
		return s.Words
	}
	return commonWords
}

// Length returns the token length of prompt i: seeded by (Seed, i) only.
func (s *Synthetic) Length(i int) int {
	l := s.Lengths
	if l.Stdev == 0 {
		return l.Mean
	}
	rng := rand.New(rand.NewPCG(s.Seed, uint64(i)*2+1))
	n := int(math.Round(float64(l.Mean) + rng.NormFloat64()*float64(l.Stdev)))
	return min(max(n, l.Min), l.Max)
}

// anchor opens and closes every synthetic prompt, so the tokens where the prompt meets a chat template
// are the same for every prompt (a tokenizer that merges across that boundary then adds a constant).
const anchor = "the"

// Prompt implements Source.
func (s *Synthetic) Prompt(i int) Prompt { return s.PromptOf(i, s.Length(i)) }

// PromptOf is prompt i at n tokens, whatever the length distribution says (a context ladder's
// rungs ask for their own lengths).
func (s *Synthetic) PromptOf(i, n int) Prompt {
	m := s.wordsFor(n)
	words := s.words()
	ws := make([]string, 0, m)
	if s.PrefixCount > 0 && s.PrefixTokens > 0 {
		ws = pickWords(ws, words, rand.New(rand.NewPCG(s.wordSeed(0xabcdef), uint64(i%s.PrefixCount))), min(s.PrefixTokens, m))
	}
	ws = pickWords(ws, words, rand.New(rand.NewPCG(s.wordSeed(0), uint64(i)*2)), m-len(ws))
	ws[0], ws[len(ws)-1] = anchor, anchor
	p := Prompt{Text: strings.Join(ws, " ")}
	if s.Exact {
		p.Tokens = n
	}
	return p
}

// wordsFor is how many words make a prompt of n tokens (at least one).
func (s *Synthetic) wordsFor(n int) int {
	m := n - s.Offset
	if s.PerWord > 0 {
		m = int(math.Round(float64(n-s.Offset) / s.PerWord))
	}
	return max(m, 1)
}

// Prefixed is a Source whose prompts share prefixes by design: PrefixBlocks names prompt i's
// leading blocks (two prompts whose blocks open with the same ids share those tokens), so a load
// can say what hit rate a prefix cache should reach on what it sent.
type Prefixed interface {
	PrefixBlocks(i int) []PrefixBlock
}

// PrefixBlock is a block of a prompt that other prompts may share: its identity and its tokens.
type PrefixBlock struct {
	ID     uint64
	Tokens int
}

// PrefixBlocks implements Prefixed: a shared-prefix prompt's one block is its group's prefix.
func (s *Synthetic) PrefixBlocks(i int) []PrefixBlock {
	if s.PrefixCount <= 0 || s.PrefixTokens <= 0 {
		return nil
	}
	return []PrefixBlock{{ID: uint64(i % s.PrefixCount), Tokens: min(s.PrefixTokens, s.Length(i))}}
}

func pickWords(ws, words []string, rng *rand.Rand, n int) []string {
	for range n {
		ws = append(ws, words[rng.IntN(len(words))])
	}
	return ws
}

// Calibrate keeps the built-in words the tokenizer holds as one token after a space, then measures the
// fixed offset of whole prompts (the first word has no leading space) on a few samples. It fails when
// fewer than 50 words survive or when samples disagree, since then exact lengths cannot be promised.
func (s *Synthetic) Calibrate(ctx context.Context, c Counter) error {
	// A word is probed between anchors, so its count is not blurred by where the text meets a template.
	base, err := c.Count(ctx, anchor+" "+anchor)
	if err != nil {
		return err
	}
	var keep []string
	seen := map[string]bool{}
	for _, w := range commonWords {
		if seen[w] {
			continue
		}
		seen[w] = true
		n, err := c.Count(ctx, anchor+" "+w+" "+anchor)
		if err != nil {
			return err
		}
		if n-base == 1 {
			keep = append(keep, w)
		}
	}
	if len(keep) < 50 {
		return fmt.Errorf("tokenizer holds only %d of %d common words as single tokens: cannot build prompts of exact length", len(keep), len(seen))
	}
	s.Words, s.Offset, s.Exact = keep, 0, false
	offset := 0
	for i := range 3 {
		p := s.Prompt(i)
		n, err := c.Count(ctx, p.Text)
		if err != nil {
			return err
		}
		d := n - s.Length(i)
		if i == 0 {
			offset = d
		} else if d != offset {
			return fmt.Errorf("synthetic prompts are not additive under this tokenizer (offsets %d and %d)", offset, d)
		}
	}
	s.Offset, s.Exact = offset, true
	return nil
}

// CalibrateLinear fits tokens = Offset + PerWord × words from two prompts of the built-in words, for a
// Counter too costly to ask per word (the server's usage.prompt_tokens). Lengths are then close, not
// exact: the server's usage on each request tells the truth. It fails when a word costs more than two
// tokens or the fit is not positive.
func (s *Synthetic) CalibrateLinear(ctx context.Context, c Counter) error {
	const short, long = 16, 272
	probe := func(n int) (int, error) {
		ws := pickWords(nil, commonWords, rand.New(rand.NewPCG(s.Seed, 99)), n)
		ws[0], ws[n-1] = anchor, anchor
		return c.Count(ctx, strings.Join(ws, " "))
	}
	a, err := probe(short)
	if err != nil {
		return err
	}
	b, err := probe(long)
	if err != nil {
		return err
	}
	per := float64(b-a) / float64(long-short)
	if per <= 0 || per > 2 {
		return fmt.Errorf("usage calibration: %d words counted %d tokens and %d words %d: not a usable tokens-per-word fit", short, a, long, b)
	}
	s.Words, s.Exact, s.PerWord = nil, false, per
	s.Offset = int(math.Round(float64(a) - per*short))
	return nil
}

// ErrMismatch is wrapped by Rebase's errors when the counter answered but does not count as the local
// tokenizer plus a constant: the local file is probably not the served model's.
var ErrMismatch = errors.New("the server does not count as the local tokenizer plus a constant")

// Rebase makes prompts calibrated with a local tokenizer exact as c counts them. The server adds tokens
// the local file cannot see (a chat template, a BOS it declares elsewhere); since every prompt opens and
// closes with the same anchor word, they are a constant. Rebase measures it on two prompts, folds it
// into Offset, checks a third prompt and returns the constant.
func (s *Synthetic) Rebase(ctx context.Context, c Counter) (int, error) {
	if !s.Exact {
		return 0, fmt.Errorf("rebase: prompts are not calibrated exactly yet (call Calibrate first)")
	}
	diff := func(i int) (int, error) {
		n, err := c.Count(ctx, s.Prompt(i).Text)
		return n - s.Length(i), err
	}
	d, err := diff(0)
	if err != nil {
		return 0, err
	}
	d1, err := diff(1)
	if err != nil {
		return 0, err
	}
	if d1 != d {
		return 0, fmt.Errorf("rebase: %w (%+d and %+d tokens beyond it on two prompts)", ErrMismatch, d, d1)
	}
	s.Offset += d
	if d2, err := diff(2); err != nil || d2 != 0 {
		s.Offset -= d
		if err == nil {
			err = fmt.Errorf("rebase: %w (a third prompt is still %+d tokens off after the template's %+d)", ErrMismatch, d2, d)
		}
		return 0, err
	}
	return d, nil
}
