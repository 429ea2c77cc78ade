package load

import (
	"testing"
	"time"
)

func TestPollScheduleFollowsTheShortestGaps(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	cases := []struct {
		name  string
		gaps  func(i int) (time.Duration, bool)
		every time.Duration
	}{
		{"steady 4 ms", func(int) (time.Duration, bool) { return ms(4.0), false }, 2 * time.Millisecond},
		{"30 ms decode steps", func(int) (time.Duration, bool) { return ms(30), false }, pollMax},
		{"fast 1.5 ms", func(int) (time.Duration, bool) { return ms(1.5), false }, pollMin},
		// 10 % of gaps inside one read: the schedule is too slow for some streams, back to the fastest.
		{"some reads joint", func(i int) (time.Duration, bool) { return ms(6), i%10 == 0 }, pollMin},
		// 3 % of the gaps short (a stream sometimes fast): the 5th percentile ignores them.
		{"a few short gaps", func(i int) (time.Duration, bool) {
			if i%33 == 0 {
				return ms(0.5), false
			}
			return ms(6), false
		}, 3 * time.Millisecond},
	}
	for _, tc := range cases {
		p := newPollSchedule()
		if p.every != pollMin {
			t.Fatalf("starts at %v", p.every)
		}
		for i := range pollEpoch - 1 {
			p.gap(tc.gaps(i))
		}
		if p.every != pollMin {
			t.Fatalf("%s: changed before an epoch's gaps: %v", tc.name, p.every)
		}
		p.gap(tc.gaps(pollEpoch - 1))
		if p.every != tc.every {
			t.Errorf("%s: every %v, want %v", tc.name, p.every, tc.every)
		}
		if p.lo != pollMin || p.hi != tc.every {
			t.Errorf("%s: polled from %v to %v, want %v to %v", tc.name, p.lo, p.hi, pollMin, tc.every)
		}
	}
}

func TestSpaceMarksSharesTheReadsSpan(t *testing.T) {
	ms := time.Millisecond
	marks := []mark{{at: 112 * ms, tok: 1}, {at: 112 * ms, tok: 1}, {at: 112 * ms, tok: 1}}
	spaceMarks(marks, 100*ms)
	want := []time.Duration{104 * ms, 108 * ms, 112 * ms}
	for i, m := range marks {
		if m.at != want[i] || m.joint != (i > 0) {
			t.Fatalf("mark %d: at %v joint %v, want %v joint %v", i, m.at, m.joint, want[i], i > 0)
		}
	}
	// A span that is empty (clocks disagree): the times stay, the marks are still joint.
	marks = []mark{{at: 5 * ms}, {at: 5 * ms}}
	spaceMarks(marks, 6*ms)
	if marks[0].at != 5*ms || marks[1].at != 5*ms || !marks[1].joint || marks[0].joint {
		t.Fatalf("empty span: %+v", marks)
	}
}
