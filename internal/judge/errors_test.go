package judge

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// withErrors adds failed requests of the given kinds to a sweep's constant rung.
func withErrors(ep *results.Endpoint, kinds map[string]int) {
	r := &ep.Load.Runs[2]
	r.Errors = map[string]int{}
	for k, n := range kinds {
		r.Errors[k] += n
		r.Requests.Errored += n
	}
}

// The audit's fault run: 411 of 896 requests failed, yet the run ended ok. Any error flags; above
// the configured share the GPU fails (exit 1 without --fail-on-flag), with the errors by kind.
func TestApplyErrorRateGate(t *testing.T) {
	tests := []struct {
		name     string
		kinds    map[string]int
		limit    *float64
		status   results.Status
		result   string
		inReason []string
	}{
		{"no error passes", nil, fp(1), results.StatusOK, ResultPass, []string{"0 of 2400 requests failed"}},
		{"one error flags below the share", map[string]int{"http_500": 1}, fp(1), results.StatusFlag, ResultPass, []string{"1 of 2401", "http_500 1"}},
		{"many errors fail", map[string]int{"http_500": 250, "cut_stream": 161}, fp(1), results.StatusFailed, ResultFail,
			[]string{"411 of 2811 requests failed", "http_500 250, cut_stream 161", "above 1.00 % (default)"}},
		{"a disabled gate still flags", map[string]int{"timeout": 500}, nil, results.StatusFlag, ResultDisabled, []string{"500 of 2900", "timeout 500"}},
		{"zero tolerance fails on one", map[string]int{"connect": 1}, fp(0), results.StatusFailed, ResultFail, []string{"connect 1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := summary(healthy(), healthy())
			withErrors(&s.Hosts[0].Models[0].Endpoints[1], tc.kinds)
			cfg := DefaultConfig()
			cfg.MaxErrorRatePct.Value = tc.limit
			Apply(s, cfg)
			ep := s.Hosts[0].Models[0].Endpoints[1]
			v := verdict(t, ep, CheckErrorRate)
			if ep.Status != tc.status || v.Result != tc.result {
				t.Fatalf("status %s verdict %s (%s), want %s %s", ep.Status, v.Result, v.Reason, tc.status, tc.result)
			}
			text := v.Reason
			for _, fl := range ep.Flags {
				text += "\n" + fl.Reason
			}
			for _, want := range tc.inReason {
				if !strings.Contains(text, want) {
					t.Errorf("reasons %q lack %q", text, want)
				}
			}
			if tc.status != results.StatusOK && ExitCode(s, tc.status == results.StatusFlag, false) != 1 {
				t.Errorf("exit code %d, want 1", ExitCode(s, true, false))
			}
			Apply(s, cfg) // idempotent: the flag is the judge's own
			if got := len(s.Hosts[0].Models[0].Endpoints[1].Flags); got != len(ep.Flags) {
				t.Errorf("second Apply: %d flags, want %d", got, len(ep.Flags))
			}
		})
	}
}

func TestErrorRateDefaultRecorded(t *testing.T) {
	th := DefaultConfig().Thresholds()["gate.max_error_rate_pct"]
	if th.Value == nil || *th.Value != 1 || th.Source != SourceDefault {
		t.Fatalf("max_error_rate_pct threshold %+v, want 1 %% (default)", th)
	}
}
