package main

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// bench's profile flags default to the shared profile (the one a plan's load section defaults to),
// and every field of that profile that has a default has its flag here.
func TestBenchFlagDefaultsAreTheSharedProfile(t *testing.T) {
	d := results.DefaultLoadConfig()
	flags := map[string]struct {
		flag, want string
	}{
		"Profile": {"profile", d.Profile}, "API": {"api", d.API},
		"PromptTokens": {"prompt-tokens", strconv.Itoa(d.PromptTokens)}, "OutputTokens": {"output-tokens", strconv.Itoa(d.OutputTokens)},
		"MaxConcurrency": {"max-concurrency", strconv.Itoa(d.MaxConcurrency)}, "Concurrency": {"concurrency", strconv.Itoa(d.Concurrency)},
		"Rates": {"rates", strconv.Itoa(d.Rates)}, "MaxDuration": {"max-duration", time.Duration(d.MaxDuration).String()},
		"Warmup": {"warmup", d.Warmup}, "Data": {"data", d.Data}, "Workload": {"workload", d.Workload}, "TraceSpeed": {"trace-speed", strconv.FormatFloat(d.TraceSpeed, 'g', -1, 64)}, "Seed": {"seed", strconv.FormatInt(d.Seed, 10)},
		"Reader": {"reader", d.Reader}, "MinSamples": {"min-samples", strconv.Itoa(d.MinSamples)},
		"MaxRungDuration": {"max-rung-duration", time.Duration(d.MaxRungDuration).String()},
		"TimeBudget":      {"time-budget", time.Duration(d.TimeBudget).String()},
	}
	v := reflect.ValueOf(d)
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; !v.Field(i).IsZero() {
			if _, ok := flags[name]; !ok {
				t.Errorf("results.DefaultLoadConfig sets %s but this test does not check its bench flag", name)
			}
		}
	}
	cmd := newBenchCmd()
	for field, f := range flags {
		fl := cmd.Flags().Lookup(f.flag)
		if fl == nil {
			t.Errorf("%s: no --%s flag", field, f.flag)
			continue
		}
		if fl.DefValue != f.want {
			t.Errorf("--%s defaults to %q, the shared profile's %s is %q", f.flag, fl.DefValue, field, f.want)
		}
	}
}
