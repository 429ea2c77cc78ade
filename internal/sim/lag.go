package sim

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// The simulator knows its own lag: a token sent later than LagLimit after its due time (its step's
// end, or its fixed-mode slot) means the machine cannot keep up, and its client sees bursts no GPU
// produced. It is said in the log and in /metrics, never hidden.

// LagLimit is how late a token may leave before the simulator counts itself behind schedule.
const LagLimit = 20 * time.Millisecond

// lagReportEvery spaces the log lines: one per period at most, saying what the period saw.
const lagReportEvery = 10 * time.Second

type lagMeter struct {
	late    atomic.Int64 // tokens sent more than LagLimit after they were due, since start
	maxNs   atomic.Int64 // the largest lag since start
	winLate atomic.Int64 // the same two since the last log line
	winMax  atomic.Int64
	lastLog atomic.Int64 // unix ns of the last log line
	log     io.Writer    // nil: no log
	name    string
}

// observe records that tokens tokens, the oldest due at dueNs (unix ns; 0: unknown), left at now.
func (m *lagMeter) observe(now time.Time, dueNs int64, tokens int) {
	if dueNs == 0 || tokens <= 0 {
		return
	}
	lag := now.UnixNano() - dueNs
	if lag <= int64(LagLimit) {
		return
	}
	m.late.Add(int64(tokens))
	m.winLate.Add(int64(tokens))
	raise(&m.maxNs, lag)
	raise(&m.winMax, lag)
	m.report(now)
}

// report writes one log line per lagReportEvery at most (the first at once).
func (m *lagMeter) report(now time.Time) {
	last := m.lastLog.Load()
	if m.log == nil || (last != 0 && now.UnixNano()-last < int64(lagReportEvery)) || !m.lastLog.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	late, worst := m.winLate.Swap(0), m.winMax.Swap(0)
	fmt.Fprintf(m.log, "gpuvet sim %s: behind schedule: %d token(s) left up to %.0f ms after they were due (limit %v): this machine cannot keep up with the load, so clients see token timing in bursts (see gpuvet_sim:tokens_behind_schedule_total)\n",
		m.name, late, float64(worst)/1e6, LagLimit)
}

func raise(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}
