package registry

import (
	"testing"

	"github.com/gpuvet/gpuvet/internal/backendkind"
)

// Every fleet row of the backend table has a registry entry that opens and cleans it, and every
// entry a fleet row: `gpuvet run --backend NAME` reads the row to choose fleet.Execute, then opens
// the entry; `gpuvet clean` hands the entry's cleaner its manifests.
func TestEveryFleetRowIsRegistered(t *testing.T) {
	for _, k := range backendkind.Kinds {
		b, ok := Get(k.Name)
		if ok != k.Fleet {
			t.Errorf("backend %s: fleet row %v, registered %v", k.Name, k.Fleet, ok)
		}
		if ok && (b.Open == nil || b.Clean == nil) {
			t.Errorf("backend %s: registered without an opener or a cleaner", k.Name)
		}
	}
	for _, name := range Names() {
		if !backendkind.Of(name).Fleet {
			t.Errorf("registered backend %s has no fleet row in the backend table", name)
		}
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("registering ssh again did not panic")
		}
	}()
	Register("ssh", Backend{})
}
