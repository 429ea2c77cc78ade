package load

import (
	"fmt"
	"time"

	"github.com/gpuvet/gpuvet/internal/metrics"
)

// Blame the right side: a request late because the server would not accept its connection is the
// server's delay, kept out of the client's lag; tokens that arrive in bursts are the server (or a
// proxy) behind its schedule, said so that ITL is not read as the GPU's.

const (
	// ConnectLimit is the p99 TCP connect time above which the server is slow to accept.
	ConnectLimit = 100 * time.Millisecond
	// burstGap: chunks closer than this came in one read, not as the server produced them.
	burstGap = 200 * time.Microsecond
	// burstShare of all chunk gaps in bursts says the stream was buffered.
	burstShare = 0.5
	// minBurstGaps: below it, a few coalesced chunks are chance, not a pattern.
	minBurstGaps = 200
)

// setConnect records how long a request that opened a connection waited for it (since() nanoseconds):
// the dial and the server's accept, a wait for a slot held by unaccepted dials included.
func (r *Record) setConnect(start, done int64) {
	if start == 0 || done < start {
		return
	}
	r.connect = time.Duration(done - start)
	r.ConnectMs = float64(r.connect) / 1e6
}

// acceptCheck says whether the server refused or was slow to accept this rung's connections.
func acceptCheck(o *rungOut) (bool, string) {
	var dials []float64
	refused := 0
	for _, r := range o.recs {
		if r.Warmup {
			continue
		}
		if r.Error == errConnect {
			refused++
		}
		if r.connect > 0 {
			dials = append(dials, r.ConnectMs)
		}
	}
	d := metrics.Summarize(dials)
	slow := d.Count > 0 && d.P99 > float64(ConnectLimit)/1e6
	if refused == 0 && !slow {
		return false, ""
	}
	return true, fmt.Sprintf("SERVER REFUSING: %d connection(s) refused, new connections took %.0f ms to be accepted at p99 (max %.0f ms, %d dials; limit %v): "+
		"the server, not the client, held requests back (file descriptors, accept backlog: check its ulimit -n and somaxconn); this delay is not counted as client lag",
		refused, d.P99, d.Max, d.Count, ConnectLimit)
}

// burstCheck says when most chunk gaps of the rung's streams were under burstGap or in one read.
func burstCheck(o *rungOut) string {
	gaps, bursts := 0, 0
	for _, r := range o.recs {
		if r.Warmup || !r.ok() {
			continue
		}
		for i := 1; i < len(r.marks); i++ {
			gaps++
			if r.marks[i].joint || r.marks[i].at-r.marks[i-1].at < burstGap {
				bursts++
			}
		}
	}
	if gaps < minBurstGaps || float64(bursts) < burstShare*float64(gaps) {
		return ""
	}
	return fmt.Sprintf("token timing came in bursts: %.0f %% of %d chunk gaps were under %v (several chunks in one read): the server or a proxy fell behind its own schedule or buffered the stream (or, on a starved client machine, the client read late), so ITL and TPOT measure the buffering, not the GPU",
		100*float64(bursts)/float64(gaps), gaps, burstGap)
}
