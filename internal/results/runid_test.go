package results

import (
	"strings"
	"testing"
	"time"
)

// Two runs started in the same second must not share an id: they would share a manifest, a remote
// folder and VM names, and one run's cleanup would delete the other's.
func TestNewRunIDUniqueInOneSecond(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewRunID(now)
		if !strings.HasPrefix(id, "20261201T103000Z-") || len(id) != len("20261201T103000Z-3fa9c1d2") {
			t.Fatalf("run id %q: want the UTC time, a dash and 8 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("run id %q repeated within one second", id)
		}
		seen[id] = true
	}
}
