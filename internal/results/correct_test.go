package results

import "testing"

func TestGreedyFirstDiff(t *testing.T) {
	ids := func(v ...int) GreedyOutput { return GreedyOutput{TokenIDs: v} }
	a := &GreedyOutputs{Basis: "token_ids", Outputs: []GreedyOutput{ids(1, 2, 3), ids(4, 5, 6)}}
	if d := a.FirstDiff(a); d != nil {
		t.Fatalf("the same outputs differ: %v", d)
	}
	b := &GreedyOutputs{Basis: "token_ids", Outputs: []GreedyOutput{ids(1, 2, 3), ids(4, 5)}}
	if d := b.FirstDiff(a); d == nil || d.String() != "prompt 1, token 2: end instead of 6" {
		t.Errorf("shorter: %v", d)
	}
	c := &GreedyOutputs{Basis: "text", Outputs: []GreedyOutput{{Text: "héllo"}, {Text: "x"}}}
	d := &GreedyOutputs{Basis: "token_ids", Outputs: []GreedyOutput{{Text: "hello", TokenIDs: []int{9}}, {Text: "x"}}}
	if got := c.FirstDiff(d); got == nil || got.String() != `prompt 0, character 1: 'é' instead of 'e'` {
		t.Errorf("by text: %v", got)
	}
	if got := (&GreedyOutputs{Basis: "text", Outputs: []GreedyOutput{{Text: "héllo"}}}).FirstDiff(c); got == nil || got.Unit != "prompt" || got.Prompt != 1 {
		t.Errorf("a missing prompt: %v", got)
	}
}
