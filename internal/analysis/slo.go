package analysis

import (
	"fmt"
	"strings"
	"time"
)

// SLO is the service-level objective for goodput: a request is good when it meets every set bound.
// ITL is judged per request on its mean inter-token latency (its TPOT), as vLLM's goodput does.
type SLO struct {
	TTFT, ITL, TPOT, E2E time.Duration
}

// Empty reports whether no bound is set (every request is good).
func (s *SLO) Empty() bool { return s == nil || *s == SLO{} }

// Met reports whether a successful request with these latencies (ms) met every bound.
func (s *SLO) Met(ttftMs, tpotMs, e2eMs float64) bool {
	if s.Empty() {
		return true
	}
	within := func(limit time.Duration, ms float64) bool {
		return limit == 0 || ms <= float64(limit)/1e6
	}
	return within(s.TTFT, ttftMs) && within(s.ITL, tpotMs) && within(s.TPOT, tpotMs) && within(s.E2E, e2eMs)
}

// ParseSLO reads "ttft=200ms,itl=50ms" (keys ttft, itl, tpot, e2e; Go durations).
func ParseSLO(s string) (SLO, error) {
	var slo SLO
	if strings.TrimSpace(s) == "" {
		return slo, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return SLO{}, fmt.Errorf("--slo %q: %q is not key=duration (e.g. ttft=200ms,itl=50ms)", s, kv)
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return SLO{}, fmt.Errorf("--slo %q: %s=%q is not a positive duration like 200ms", s, k, v)
		}
		bound := map[string]*time.Duration{"ttft": &slo.TTFT, "itl": &slo.ITL, "tpot": &slo.TPOT, "e2e": &slo.E2E}[strings.ToLower(strings.TrimSpace(k))]
		if bound == nil {
			return SLO{}, fmt.Errorf("--slo %q: unknown key %q (want ttft, itl, tpot or e2e)", s, k)
		}
		if *bound != 0 {
			return SLO{}, fmt.Errorf("--slo %q: %s is given twice", s, strings.ToLower(strings.TrimSpace(k)))
		}
		*bound = d
	}
	return slo, nil
}
