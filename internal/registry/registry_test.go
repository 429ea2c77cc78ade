package registry

import (
	"testing"

	"github.com/spf13/pflag"

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

// Every flag a fleet row maps to a key is one its package registers (--dry-run, which several
// backends read, is the command's), and every flag a package registers has its row's key: the
// table and the packages never drift apart.
func TestRowFlagsAreTheRegisteredOnes(t *testing.T) {
	for _, k := range backendkind.Kinds {
		b, ok := Get(k.Name)
		if !ok {
			continue
		}
		fl := pflag.NewFlagSet(k.Name, pflag.ContinueOnError)
		if b.Flags != nil {
			b.Flags(fl)
		}
		if b.CleanFlags != nil {
			cf := pflag.NewFlagSet(k.Name+" clean", pflag.ContinueOnError)
			b.CleanFlags(cf)
			cf.VisitAll(func(f *pflag.Flag) {
				if fl.Lookup(f.Name) == nil {
					t.Errorf("backend %s: clean flag --%s is not among its run flags", k.Name, f.Name)
				}
			})
		}
		mapped := map[string]bool{}
		for _, f := range k.Flags {
			mapped[f.Name] = true
			if fl.Lookup(f.Name) == nil && f.Name != "dry-run" {
				t.Errorf("backend %s: its row maps --%s to %s, but its package registers no such flag", k.Name, f.Name, f.Key)
			}
		}
		fl.VisitAll(func(f *pflag.Flag) {
			if !mapped[f.Name] {
				t.Errorf("backend %s: --%s has no key in its row", k.Name, f.Name)
			}
		})
	}
}
