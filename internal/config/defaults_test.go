package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The plan's load defaults are the shared profile that `gpuvet bench` and the load generator use.
func TestLoadDefaultsAreTheSharedProfile(t *testing.T) {
	got, want := Defaults().LoadConfig(), results.DefaultLoadConfig()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config's load defaults diverge from results.DefaultLoadConfig:\n got %+v\nwant %+v", got, want)
	}
}

// load.time_budget reaches the load generator, and one that plans nothing is refused naming it.
func TestTimeBudgetKey(t *testing.T) {
	p, err := Load(Options{Sets: []string{"load.time_budget=90s"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Config.LoadConfig().TimeBudget; got != results.Duration(90*time.Second) {
		t.Errorf("time budget %v, want 90s", got)
	}
	if _, err := Load(Options{Sets: []string{"load.time_budget=0s"}}); err == nil || !strings.Contains(err.Error(), "load.time_budget") {
		t.Errorf("a zero budget: %v, want an error naming load.time_budget", err)
	}
}
