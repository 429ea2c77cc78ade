package load

import (
	"fmt"
	"math"
)

// An error is not a sample: a rung whose requests fail goes on only while its successes can still
// outweigh its failures, then stops and says so (results.Run.ErrorStop): waiting out its bounds only
// sends more requests to a broken server (one drew 143,555 failing requests from a 5 s bench).
const (
	// errStopMin is the fewest failures that decide a rung; a wider rung's first wave needs one per slot.
	errStopMin = 20
	// errStopShare: the rung stops once the 95 % Wilson interval of its failed share lies above it.
	errStopShare = 0.5
)

// errorsDecide says why ended requests decide a rung ("": not): enough failed, and none or most succeeded.
func errorsDecide(good, bad, slots int) string {
	if bad < max(errStopMin, slots) {
		return ""
	}
	if good == 0 {
		return fmt.Sprintf("stopped after %d failed requests and no successful one: an error is not a sample, and more would fail too", bad)
	}
	if lo := wilsonLow(bad, good+bad); lo > errStopShare {
		return fmt.Sprintf("stopped after %d of %d requests failed (95 %% interval of the failed share above %.0f%%): the errors decide the rung", bad, good+bad, 100*errStopShare)
	}
	return ""
}

// wilsonLow is the lower end of the 95 % Wilson score interval of k successes in n trials.
func wilsonLow(k, n int) float64 {
	const z = 1.96
	p, nf := float64(k)/float64(n), float64(n)
	d := 1 + z*z/nf
	c := p + z*z/(2*nf)
	return (c - z*math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))) / d
}

// slotsOf is how many requests a rung holds in flight at once (an open loop: one second's worth).
func slotsOf(s rungSpec) int {
	if s.openLoop() {
		return int(math.Ceil(s.Rate))
	}
	return s.Concurrency
}
