package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxUnhealthy is the circuit breaker's limit (fleet.Breaker; kubernetes.max_unhealthy,
// slurm.max_drain): how many hosts one run may act on, a count or a share of those vetted.
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
