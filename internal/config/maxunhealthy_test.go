package config

import "testing"

// The breaker's limit (kubernetes.max_unhealthy, slurm.max_drain): a share rounds up to at least
// one node and never past the fleet; a count is taken as it is.
func TestParseMaxUnhealthy(t *testing.T) {
	for _, tc := range []struct {
		in     string
		vetted int
		allow  int
	}{
		{"10%", 200, 20}, {"10 %", 200, 20}, {"10%", 3, 1}, {"10%", 10, 1}, {"10%", 11, 2}, {"100%", 7, 7},
		{"0.5%", 1000, 5}, {"5", 200, 5}, {"0", 200, 0}, {"500", 3, 500},
	} {
		m, err := ParseMaxUnhealthy(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if got := m.Of(tc.vetted); got != tc.allow {
			t.Errorf("%q of %d: %d, want %d", tc.in, tc.vetted, got, tc.allow)
		}
	}
	for _, bad := range []string{"", "-1", "0%", "101%", "ten", "10%%", "1.5", "%"} {
		if _, err := ParseMaxUnhealthy(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
