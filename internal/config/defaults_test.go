package config

import (
	"reflect"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The plan's load defaults are the shared profile that `gpuvet bench` and the load generator use.
func TestLoadDefaultsAreTheSharedProfile(t *testing.T) {
	got, want := Defaults().LoadConfig(), results.DefaultLoadConfig()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config's load defaults diverge from results.DefaultLoadConfig:\n got %+v\nwant %+v", got, want)
	}
}
