package dataset

import (
	"strings"
	"testing"
)

func TestMultiTurnCarriesItsHistory(t *testing.T) {
	m := &MultiTurn{Words: &Synthetic{Lengths: Lengths{Mean: 30, Min: 30, Max: 30}, Seed: 5, Exact: true}, Turns: 3, ReplyTokens: 7}
	p0, p1, p2 := m.Prompt(3), m.Prompt(4), m.Prompt(5) // session 1
	if len(p0.History) != 0 || len(p1.History) != 2 || len(p2.History) != 4 {
		t.Fatalf("history lengths %d, %d, %d; want 0, 2, 4", len(p0.History), len(p1.History), len(p2.History))
	}
	if p1.History[0] != p0.Text || p2.History[2] != p1.Text || p2.History[1] != p1.History[1] {
		t.Error("a turn's history is not the session's earlier turns")
	}
	if n := len(strings.Fields(p1.History[1])); n != 7 {
		t.Errorf("a reply of %d words, want 7", n)
	}
	if m.Prompt(0).Text == p0.Text {
		t.Error("two sessions open alike")
	}
	b := m.PrefixBlocks(5)
	if len(b) != 5 || b[0] != m.PrefixBlocks(4)[0] || b[1].Tokens != 7 || b[4].Tokens != 30 {
		t.Errorf("blocks %v", b)
	}
}
