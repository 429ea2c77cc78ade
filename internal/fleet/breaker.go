package fleet

import (
	"fmt"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The circuit breaker bounds what one run does to a fleet on its own verdicts (a quarantine taint,
// a Slurm drain): a setting wrong for every node (an image no node can pull, a gate far too tight)
// fails every node alike, and must not take the whole fleet out of service. Past the limit
// (kubernetes.max_unhealthy, slurm.max_drain) an action is only reported, and the run fails.

// MaxUnhealthy is the breaker's limit; config owns its parsing (a config check names the key).
type MaxUnhealthy = config.MaxUnhealthy

// ParseMaxUnhealthy reads a limit ("10%" or "5").
func ParseMaxUnhealthy(s string) (MaxUnhealthy, error) { return config.ParseMaxUnhealthy(s) }

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

// Allow asks for one action on a host, what in words ("taint node n7 …"): false when the limit is
// reached, the action recorded as held and not to be taken.
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

// RecordAction adds one vetted node's actions to the summary (fleet.node_actions), for every
// backend that acts on its nodes (Kubernetes taints and conditions, Slurm drains).
func RecordAction(s *results.Summary, a results.NodeAction) {
	if s.Fleet == nil {
		s.Fleet = &results.Fleet{}
	}
	s.Fleet.NodeActions = append(s.Fleet.NodeActions, a)
}
