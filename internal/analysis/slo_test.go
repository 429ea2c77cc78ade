package analysis

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseSLO(t *testing.T) {
	good := map[string]SLO{
		"":                              {},
		"ttft=200ms,itl=50ms":           {TTFT: 200 * time.Millisecond, ITL: 50 * time.Millisecond},
		" TTFT = 1s , e2e=2s, tpot=5ms": {TTFT: time.Second, E2E: 2 * time.Second, TPOT: 5 * time.Millisecond},
	}
	for in, want := range good {
		got, err := ParseSLO(in)
		if err != nil || got != want {
			t.Errorf("ParseSLO(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"ttft":                  "not key=duration",
		"ttft=0s":               "ttft",
		"ttft=-1ms":             "ttft",
		"ttft=fast":             "ttft",
		"latency=1s":            "unknown key",
		"ttft=200ms,":           "not key=duration",
		"ttft=200ms,ttft=100ms": "ttft",
	}
	for in, want := range bad {
		if _, err := ParseSLO(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSLO(%q): error %v, want one naming %q", in, err, want)
		}
	}
}

// FuzzParseSLO: any --slo either parses to positive bounds that print back to the same SLO, or is
// an error; it never panics.
func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{"", "ttft=200ms,itl=50ms", "e2e=1h", "tpot=1ns", "ttft", "ttft=", "=1s", "ttft=1s,,itl=1s", "ttft=1e9h", "x=1s", "ttft=1s,ttft=2s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		slo, err := ParseSLO(in)
		if err != nil {
			return
		}
		var parts []string
		for k, d := range map[string]time.Duration{"ttft": slo.TTFT, "itl": slo.ITL, "tpot": slo.TPOT, "e2e": slo.E2E} {
			if d < 0 {
				t.Fatalf("ParseSLO(%q): %s=%v, a negative bound", in, k, d)
			}
			if d > 0 {
				parts = append(parts, fmt.Sprintf("%s=%s", k, d))
			}
		}
		again, err := ParseSLO(strings.Join(parts, ","))
		if err != nil || again != slo {
			t.Fatalf("ParseSLO(%q) = %+v does not print back: %+v, %v", in, slo, again, err)
		}
	})
}
