package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// Faults are injected failures, each drawn per request from the seeded generator, so a run with
// the same --seed and the same request order fails the same way.
type Faults struct {
	Rate5xx       float64       // fraction of requests answered 500 (vLLM-shaped JSON error)
	Rate429       float64       // fraction answered 429 Too Many Requests
	CutRate       float64       // fraction of streams whose connection is closed mid-way
	StallRate     float64       // fraction of requests that pause for Stall at a random token
	Stall         time.Duration // length of a stall
	MalformedRate float64       // fraction of streams with one malformed SSE event (truncated JSON)
	SlowStart     time.Duration // the server answers 503 (health included) for this long after start
}

func (f Faults) validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{{"fault-5xx", f.Rate5xx}, {"fault-429", f.Rate429}, {"fault-cut", f.CutRate}, {"fault-stall", f.StallRate}, {"fault-malformed", f.MalformedRate}} {
		if !(r.v >= 0 && r.v <= 1) { // NaN too
			return fmt.Errorf("%s: a rate must be in [0, 1], got %v", r.name, r.v)
		}
	}
	if f.Rate5xx+f.Rate429 > 1 {
		return fmt.Errorf("fault-5xx + fault-429: together at most 1, got %v", f.Rate5xx+f.Rate429)
	}
	if f.Stall < 0 || f.SlowStart < 0 {
		return fmt.Errorf("stall / slow-start: durations must be ≥ 0, got %v / %v", f.Stall, f.SlowStart)
	}
	if f.StallRate > 0 && f.Stall == 0 {
		return fmt.Errorf("fault-stall-for: a stall rate needs a stall length (e.g. --fault-stall-for 2s)")
	}
	return nil
}

// faultPlan is what happens to one request. Token positions are 1-based; 0 means never.
type faultPlan struct {
	status      int
	cutAt       int // the connection closes before token cutAt is sent
	stallAt     int // the stream pauses before token stallAt
	stall       time.Duration
	malformedAt int // a malformed event goes out before token malformedAt
}

// plan draws a request's faults; it always draws the same number of values, whatever the rates, so
// changing one rate does not reshuffle the others.
func (f Faults) plan(rng *rand.Rand, out int) faultPlan {
	var p faultPlan
	u, cut, stall, bad := rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64()
	pos := []int{1 + rng.IntN(out), 1 + rng.IntN(out), 1 + rng.IntN(out)}
	switch {
	case u < f.Rate5xx:
		p.status = http.StatusInternalServerError
	case u < f.Rate5xx+f.Rate429:
		p.status = http.StatusTooManyRequests
	}
	if cut < f.CutRate {
		// Mid-way: after at least one token when there is more than one.
		p.cutAt = pos[0]
		if out > 1 {
			p.cutAt = 2 + (pos[0]-1)%(out-1)
		}
	}
	if stall < f.StallRate {
		p.stallAt, p.stall = pos[1], f.Stall
	}
	if bad < f.MalformedRate {
		p.malformedAt = pos[2]
	}
	return p
}

func (p faultPlan) httpError() *apiError {
	switch p.status {
	case http.StatusInternalServerError:
		return &apiError{Status: 500, Type: "InternalServerError", Message: "simulated engine error (fault injection: --fault-5xx)"}
	case http.StatusTooManyRequests:
		return &apiError{Status: 429, Type: "TooManyRequestsError", Message: "simulated overload: too many requests (fault injection: --fault-429)"}
	}
	return nil
}

// name is the trace label of the faults that touched a request ("" when none).
func (p faultPlan) name() string { return p.upTo(math.MaxInt, "") }

// upTo is the trace label of every fault a request received before token k, in the order sent,
// then extra (e.g. "client_gone"): a malformed event and then a cut are both recorded.
func (p faultPlan) upTo(k int, extra string) string {
	switch {
	case p.status == 500:
		return "http_500"
	case p.status == 429:
		return "http_429"
	}
	var s []string
	for _, f := range []struct {
		at   int
		name string
	}{{p.stallAt, "stall"}, {p.malformedAt, "malformed_chunk"}, {p.cutAt, "cut_stream"}} {
		if f.at > 0 && f.at <= k {
			s = append(s, f.name)
		}
	}
	if extra != "" {
		s = append(s, extra)
	}
	return strings.Join(s, ",")
}
