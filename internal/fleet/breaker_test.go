package fleet

import (
	"fmt"
	"strings"
	"testing"
)

// The case: 200 nodes vetted, 40 % failing, limit 10 %: 20 are acted on, 60 held, and
// the error says so in the words.
func TestBreakerStopsAtTheLimit(t *testing.T) {
	m, _ := ParseMaxUnhealthy("10%")
	b := NewBreaker(m, 200)
	taken := 0
	for i := range 80 {
		if b.Allow(fmt.Sprintf("taint node n%d", i)) {
			taken++
		}
	}
	if taken != 20 || len(b.Held()) != 60 || b.Held()[0] != "taint node n20" {
		t.Fatalf("taken %d, held %d (%v)", taken, len(b.Held()), b.Held()[:1])
	}
	err := b.Err("tainted")
	if err == nil || !strings.HasPrefix(err.Error(), "circuit breaker: 80 of 200 nodes failed (limit 10 %): nothing more tainted; is the setting wrong?") {
		t.Errorf("%v", err)
	}
	ok := NewBreaker(m, 200)
	for range 20 {
		ok.Allow("x")
	}
	if ok.Err("tainted") != nil {
		t.Errorf("at the limit, not past it: %v", ok.Err("tainted"))
	}
}
