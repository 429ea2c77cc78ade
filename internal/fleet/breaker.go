package fleet

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The circuit breaker bounds what one run does to a fleet on the strength of its own verdicts
// (a quarantine taint, a Slurm drain): a setting that is wrong for every node (an image no node
// can pull, a model that does not fit, a gate far too tight) fails every node alike, and must
// not take the whole fleet out of service in one run. Each backend that acts on its hosts asks a
// Breaker before each action; past the limit the action is not taken, only reported, and the run
// fails with the breaker's error. The limit is a setting of the backend's section
// (kubernetes.max_unhealthy; config.DefaultMaxUnhealthy is its default).

// MaxUnhealthy is how many hosts one run may act on: a count, or a share of the hosts it vetted.
type MaxUnhealthy struct {
	Count int     // used when Pct is 0
	Pct   float64 // a share in percent, > 0 and ≤ 100; 0: Count
}

// ParseMaxUnhealthy reads "10%" (a share of the hosts vetted) or "5" (a count; 0 allows none).
func ParseMaxUnhealthy(s string) (MaxUnhealthy, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(v > 0 && v <= 100) {
			return MaxUnhealthy{}, fmt.Errorf("want a share of the nodes vetted above 0 and at most 100, e.g. 10%%; got %q", s)
		}
		return MaxUnhealthy{Pct: v}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return MaxUnhealthy{}, fmt.Errorf("want a count of nodes (e.g. 5; 0: none) or a share of the nodes vetted (e.g. 10%%); got %q", s)
	}
	return MaxUnhealthy{Count: n}, nil
}

// String is the limit as the breaker's message writes it ("10 %", "5 nodes").
func (m MaxUnhealthy) String() string {
	if m.Pct > 0 {
		return strconv.FormatFloat(m.Pct, 'f', -1, 64) + " %"
	}
	return fmt.Sprintf("%d nodes", m.Count)
}

// Of is how many of vetted hosts one run may act on. A share rounds up, so any share allows
// one action on a small fleet (10 % of 3 nodes: 1), and never more than the fleet.
func (m MaxUnhealthy) Of(vetted int) int {
	if m.Pct > 0 {
		return min(vetted, int(math.Ceil(m.Pct*float64(vetted)/100-1e-9)))
	}
	return m.Count
}

// Breaker counts one run's actions against its limit. It is not safe for concurrent use: a
// backend asks it from the one goroutine that writes the verdicts.
type Breaker struct {
	limit  MaxUnhealthy
	vetted int
	allow  int
	taken  int
	held   []string // what it refused, in words
}

// NewBreaker is the breaker of a run that vetted that many hosts.
func NewBreaker(limit MaxUnhealthy, vetted int) *Breaker {
	return &Breaker{limit: limit, vetted: vetted, allow: limit.Of(vetted)}
}

// Allow asks for one action on a host; what says what it would be ("taint node n7
// gpuvet.io/unhealthy=…:NoSchedule"). true: take it. false: the limit is reached; the action is
// recorded as held (Held) and must not be taken.
func (b *Breaker) Allow(what string) bool {
	if b.taken < b.allow {
		b.taken++
		return true
	}
	b.held = append(b.held, what)
	return false
}

// Held lists the actions refused, in words, in the order asked.
func (b *Breaker) Held() []string { return b.held }

// Err is nil unless an action was held: then it says how many hosts failed against the limit
// ("circuit breaker: 37 of 200 nodes failed (limit 10 %): nothing more tainted; is the setting
// wrong?"); verb is what the backend does ("tainted", "drained").
func (b *Breaker) Err(verb string) error {
	if len(b.held) == 0 {
		return nil
	}
	return fmt.Errorf("circuit breaker: %d of %d nodes failed (limit %s): nothing more %s; is the setting wrong? (%d %s as it allowed, %d held: listed above as \"would have\")",
		b.taken+len(b.held), b.vetted, b.limit, verb, b.taken, verb, len(b.held))
}
