package load

import (
	"reflect"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// An empty profile becomes the shared one (the one config and `gpuvet bench` default to), except
// the two fields Defaults leaves to the caller.
func TestDefaultsAreTheSharedProfile(t *testing.T) {
	want := results.DefaultLoadConfig()
	want.Concurrency, want.Seed = 0, 0
	want.PromptMin, want.PromptMax = want.PromptTokens, want.PromptTokens
	if got := Defaults(results.LoadConfig{}); !reflect.DeepEqual(got, want) {
		t.Errorf("load.Defaults diverges from results.DefaultLoadConfig:\n got %+v\nwant %+v", got, want)
	}
}
