package term

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// With the rungs' planned length, a long first rung (the synchronous one, run until its samples)
// does not inflate the time left: 11 rungs of 25 s are left after it, whatever it took.
func TestProgressLeftByRungTime(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, 1, 12, false)
	clock := p.start
	p.now = func() time.Time { return clock }
	p.SetRungTime(25 * time.Second)
	clock = clock.Add(84 * time.Second)
	p.Step("gpu 0", 2, "throughput c=128")
	if out := b.String(); !strings.Contains(out, "~4m35s left") {
		t.Errorf("time left after a long first rung: %s (want 11 × 25 s)", out)
	}
}

// Issue 42: four GPUs loaded at once print their rungs at one instant: every line says the same
// time left (the one the last of them ends at), and no line calls itself "gpu 4/4".
func TestProgressParallelGPUsAgree(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, 4, 7, false)
	clock := p.start
	p.now = func() time.Time { return clock }
	p.SetRungTime(4 * time.Second)
	for i := 1; i <= 6; i++ {
		for _, g := range []string{"gpu 0", "gpu 1", "gpu 2", "gpu 3"} {
			p.Step(g, i, "constant")
			clock = clock.Add(20 * time.Millisecond)
		}
		clock = clock.Add(4 * time.Second)
	}
	b.Reset()
	for _, g := range []string{"gpu 1", "gpu 2", "gpu 0", "gpu 3"} {
		p.Step(g, 7, "constant 44.7 req/s")
		clock = clock.Add(30 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	lefts := map[string]bool{}
	for _, l := range lines {
		_, left, _ := strings.Cut(l, "elapsed, ")
		lefts[left] = true
		if strings.Contains(l, "gpu 4/4") || !strings.Contains(l, "0 of 4 GPUs done, 4 running") {
			t.Errorf("line %q", l)
		}
	}
	if len(lefts) != 1 {
		t.Errorf("%d different times left at one instant:\n%s", len(lefts), b.String())
	}
}

// Issue 41: on the H200's slow engine the line said "~3m45s left" at 4m42s, 12 rungs of 25 s
// assumed, while about 9 minutes were left. With the load's plan (its sized rungs' predicted
// lengths), the time left is the plan less the time since, the rung count is the plan's (5
// constant rates planned, not 10), and a second GPU queued behind is counted at the first's length.
func TestProgressLeftByTheLoadsPlan(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, 2, 12, false)
	clock := p.start
	p.now = func() time.Time { return clock }
	p.SetRungTime(25 * time.Second)
	p.Plan("gpu 0", 11, 4*time.Minute)
	p.Step("gpu 0", 1, "synchronous c=1")
	clock = clock.Add(110 * time.Second)
	p.Plan("gpu 0", 4, 6*time.Minute) // 5 constant rates planned: this one and 4 after it
	p.Step("gpu 0", 3, "constant 0.605 req/s")
	line := b.String()
	if !strings.Contains(line, "rung 3/7 constant") || !strings.Contains(line, "~13m50s left") {
		t.Errorf("progress %q: want rung 3/7, and 6m left on gpu 0 + the 7m50s it is planned to take on gpu 1", line)
	}
	clock = clock.Add(time.Minute)
	if s := p.Status(); !strings.Contains(s, "~12m50s left") {
		t.Errorf("a minute later: %q", s)
	}
}
