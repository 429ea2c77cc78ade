package term

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, 0, 1, false)
	clock := p.start
	p.now = func() time.Time { return clock }
	p.SetPlan(4, 6)
	clock = clock.Add(10 * time.Second)
	p.Done("gpu 1")
	p.Step("gpu 0", 3, "constant 8.8 req/s")
	p.Logf("health: %s", "ok")
	out := b.String()
	// 1 GPU done (6 rungs) + gpu 0 at rung 3 (2 done) = 8 of 24 rungs in 10 s: 20 s left.
	for _, want := range []string{"gpu 0: rung 3/6 constant 8.8 req/s", "gpu 2/4, 10s elapsed, ~20s left", "[  10.0s] health: ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q:\n%s", want, out)
		}
	}
	// A rung past the plan (the knee search probed more) grows the plan: never "rung 7/6".
	p.Step("gpu 0", 7, "constant 9.9 req/s")
	if out := b.String(); !strings.Contains(out, "gpu 0: rung 7/7 constant") || strings.Contains(out, "7/6") {
		t.Errorf("a rung past the plan:\n%s", out)
	}
	var nilP *Progress
	nilP.Step("x", 1, "y") // a nil Progress is silent
}

func TestWriterDropsRepeatsAndRungLines(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, 4, 6, false)
	w := p.Writer(func(l string) bool { return strings.HasPrefix(l, "rung ") })
	w.Write([]byte("no tokenizer: sizing with the server\nrung 1: sync\nno tokenizer: sizing with the server\npart"))
	w.Write([]byte("ial line\n"))
	if n := strings.Count(b.String(), "no tokenizer"); n != 1 || strings.Contains(b.String(), "rung 1") || !strings.Contains(b.String(), "partial line") {
		t.Errorf("writer output:\n%s", b.String())
	}
}

func TestBlockAndTable(t *testing.T) {
	var b bytes.Buffer
	tb := NewTable(&b, "A", "BB")
	tb.Row("x", "")
	tb.Flush()
	Block(&b, "Caveats", []string{"one", "one", " ", "two"})
	want := "A  BB  \nx  -   \n\nCaveats\n  one\n  two\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
