package load

import "time"

// The event loop's poll schedule. A read is timed by its newest segment's kernel receive time, so one
// stream's consecutive tokens must not share a read: the loop polls faster than the shortest
// inter-token gap it sees, and no faster (a wake-up costs about 50 µs on a small VM).
const (
	// pollMin is where a loop starts and the fastest it polls: a decode step takes 2 ms or more even
	// for small models on fast GPUs.
	pollMin = time.Millisecond
	// pollMax bounds the slowest: a finished request is seen within a poll, negligible beside its seconds.
	pollMax = 4 * time.Millisecond
	// pollGapShare is the share of recent gaps allowed below two polls (a 5th percentile).
	pollGapShare = 0.05
	// pollEpoch is how many gaps each choice of schedule looks at.
	pollEpoch = 2000
	// pollBin is the resolution of the gap histogram.
	pollBin = 250 * time.Microsecond
)

// pollSchedule picks a loop's poll interval from the inter-token gaps it reads.
type pollSchedule struct {
	every time.Duration
	// lo and hi are the fastest and slowest intervals chosen so far (the result says them).
	lo, hi time.Duration
	bins   [int(2*pollMax/pollBin) + 1]int // gaps by pollBin, the last bin: 2·pollMax and over
	n      int
}

func newPollSchedule() pollSchedule { return pollSchedule{every: pollMin, lo: pollMin, hi: pollMin} }

// gap notes one stream's time between consecutive token events; joint: they came in one read (zero).
func (p *pollSchedule) gap(d time.Duration, joint bool) {
	i := len(p.bins) - 1
	switch {
	case joint || d < 0:
		i = 0
	case d < 2*pollMax:
		i = int(d / pollBin)
	}
	p.bins[i]++
	if p.n++; p.n >= pollEpoch {
		p.choose()
	}
}

// choose sets the interval to half the epoch's 5th-percentile gap, and starts a new epoch.
func (p *pollSchedule) choose() {
	limit := int(pollGapShare * float64(p.n))
	seen, low := 0, time.Duration(0)
	for i, c := range p.bins {
		if seen+c > limit {
			low = time.Duration(i) * pollBin // the bin's lower edge: the conservative side
			break
		}
		seen += c
	}
	p.every = min(max(low/2, pollMin), pollMax)
	p.lo, p.hi = min(p.lo, p.every), max(p.hi, p.every)
	p.bins, p.n = [len(p.bins)]int{}, 0
}

// spaceMarks spaces marks of one read evenly over (from, the last one's time]; all but the first joint.
func spaceMarks(marks []mark, from time.Duration) {
	end := marks[len(marks)-1].at
	if from < end {
		step := (end - from) / time.Duration(len(marks))
		for i := range marks[:len(marks)-1] {
			marks[i].at = from + step*time.Duration(i+1)
		}
	}
	for i := 1; i < len(marks); i++ {
		marks[i].joint = true
	}
}
