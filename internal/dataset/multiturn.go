package dataset

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// MultiTurn makes conversations: session s has Turns turns; turn t's request carries the
// session's history (every earlier user turn, each followed by an assistant reply of
// ReplyTokens tokens) and a new user turn. Request index i is session i / Turns, turn i % Turns,
// so a caller that sends a session's indexes in order on one stream replays the conversation.
// The assistant replies are gpuvet's words, not what the model answered: every turn's request then
// opens with the previous turn's request whole (what a prefix cache keeps), and the prompts are
// the same on every run.
type MultiTurn struct {
	Words       *Synthetic // user turns: its lengths and calibrated words
	Turns       int
	ReplyTokens int
}

// Describe implements Source.
func (m *MultiTurn) Describe() string { return fmt.Sprintf("multi-turn (%d turns)", m.Turns) }

// SessionTurns is how many requests a session is (the caller keeps them in order).
func (m *MultiTurn) SessionTurns() int { return m.Turns }

func (m *MultiTurn) user(s, t int) string {
	w := m.Words
	return w.text(w.wordsFor(w.Length(s*m.Turns+t)), rand.New(rand.NewPCG(w.wordSeed(0x75736572), uint64(s*m.Turns+t))))
}

func (m *MultiTurn) reply(s, t int) string {
	w := m.Words
	return w.text(w.wordsFor(m.ReplyTokens+w.Offset), rand.New(rand.NewPCG(w.wordSeed(0x7265706c79), uint64(s*m.Turns+t))))
}

// Prompt implements Source: the new user turn, with the session's history.
func (m *MultiTurn) Prompt(i int) Prompt {
	s, t := i/m.Turns, i%m.Turns
	p := Prompt{Text: m.user(s, t)}
	for j := range t {
		p.History = append(p.History, m.user(s, j), m.reply(s, j))
	}
	if t == 0 && m.Words.Exact {
		p.Tokens = m.Words.Length(i) // a first turn is a synthetic prompt; later ones add the template's per-turn tokens
	}
	return p
}

// PrefixBlocks implements Prefixed: the history's turns, then the new one; two requests of a
// session share every turn the earlier one sent.
func (m *MultiTurn) PrefixBlocks(i int) []PrefixBlock {
	s, t := i/m.Turns, i%m.Turns
	id := func(j, part int) uint64 { return uint64(s*m.Turns+j)<<1 | uint64(part) }
	var out []PrefixBlock
	for j := range t {
		out = append(out, PrefixBlock{ID: id(j, 0), Tokens: m.Words.Length(s*m.Turns + j)}, PrefixBlock{ID: id(j, 1), Tokens: m.ReplyTokens})
	}
	return append(out, PrefixBlock{ID: id(t, 0), Tokens: m.Words.Length(i)})
}

// text is n words drawn by rng, anchored as every synthetic prompt is.
func (s *Synthetic) text(n int, rng *rand.Rand) string {
	ws := pickWords(make([]string, 0, n), s.words(), rng, n)
	ws[0], ws[len(ws)-1] = anchor, anchor
	return strings.Join(ws, " ")
}
