package sim

import "testing"

// The throttle and corrupt settings come from config and flags: any string is refused with an
// error or parsed into a GPU of the fleet, never a panic.
func FuzzParseThrottle(f *testing.F) {
	for _, s := range []string{"", "2", "2:hw_slowdown", "1:hw_power_brake_slowdown:5s-20s", "1::3s", "x", "3:hw_slowdown:5s-1s", "0:sw_thermal_slowdown:1h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		th, err := parseThrottle(s, 4)
		if err == nil && (th.gpu < -1 || th.gpu >= 4 || (th.gpu >= 0 && th.reason == 0) || (th.to != 0 && th.to <= th.from)) {
			t.Fatalf("%q parsed into %+v", s, th)
		}
		c, err := parseCorrupt(s, 4)
		if err == nil && (c < -1 || c >= 4) {
			t.Fatalf("%q: corrupt GPU %d", s, c)
		}
	})
}
