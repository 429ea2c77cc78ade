package backendkind

import (
	"slices"
	"strings"
	"testing"
)

// The table's rows are consistent: names unique, a fleet's host backend is a host backend, a
// flag's key lies in a section the row reads (or a shared one), and no flag is given to two rows
// with the same key.
func TestTableConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds {
		if k.Name == "" || seen[k.Name] {
			t.Errorf("row %q: empty or duplicate name", k.Name)
		}
		seen[k.Name] = true
		if k.Remote && k.Fleet {
			t.Errorf("%s: a fleet's host runs one host, not another fleet", k.Name)
		}
		if k.Simulated && k.Engines {
			t.Errorf("%s: a simulated backend launches no real engine", k.Name)
		}
		if k.Help != "" && !strings.HasPrefix(k.Help, k.Name) {
			t.Errorf("%s: help %q does not start with the name", k.Name, k.Help)
		}
		for _, f := range k.Flags {
			if strings.HasPrefix(f.Name, "-") || !strings.Contains(f.Key, ".") {
				t.Errorf("%s: flag %+v: want a name without dashes and a key in a section", k.Name, f)
			}
			if sec, _, _ := strings.Cut(f.Key, "."); sec != k.Section && sec != "model_cache" {
				t.Errorf("%s: flag --%s sets %s, outside its section %s", k.Name, f.Name, f.Key, k.Section)
			}
		}
	}
	for _, k := range Kinds {
		if k.RemoteKey != "" && !k.Fleet {
			t.Errorf("%s: only a fleet has hosts of its own (RemoteKey)", k.Name)
		}
		if k.SimKey != "" && k.SimKey != k.RemoteKey {
			t.Errorf("%s: --sim sets %s, not the key naming its hosts' backend %s", k.Name, k.SimKey, k.RemoteKey)
		}
	}
}

func TestLookups(t *testing.T) {
	if got, want := List(Names()), "local, endpoint, sim, kubernetes, ssh, opennebula or slurm"; got != want {
		t.Errorf("List(Names()) = %q, want %q", got, want)
	}
	if got := RemoteNames(); !slices.Equal(got, []string{"local", "sim"}) {
		t.Errorf("RemoteNames() = %v, want [local sim]", got)
	}
	if got := FlagKeys("dry-run"); !slices.Equal(got, []string{"kubernetes.dry_run", "slurm.dry_run"}) {
		t.Errorf("FlagKeys(dry-run) = %v: one --dry-run sets every backend's key", got)
	}
	if got := FlagKeys("no-such-flag"); got != nil {
		t.Errorf("FlagKeys(no-such-flag) = %v, want nil", got)
	}
	if k, ok := Get("nope"); ok || k.Fleet || k.Engines || k.ThisHost || k.Simulated {
		t.Errorf("Get(nope) = %+v, %v: an unknown name claims nothing", k, ok)
	}
	if !UsesSection("opennebula", "opennebula") || UsesSection("ssh", "opennebula") || UsesSection("local", "") {
		t.Error("UsesSection: want a backend to use its own section only")
	}
	if !strings.Contains(Help(), "sim, kubernetes (a cluster's GPU nodes)") {
		t.Errorf("Help() = %q: sim has no words of its own, kubernetes has", Help())
	}
}
