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
