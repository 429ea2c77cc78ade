package hostprep

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/fleet"
)

// apt-get -s output is outside input: whatever it prints, parseSimulation returns packages that are
// one word each and never reads an upgrade or a removal as an addition.
func FuzzParseSimulation(f *testing.F) {
	f.Add("Inst nvidia-open (580.159.04-1 local [all])\nConf nvidia-open (580.159.04-1 local [all])\n")
	f.Add("Inst libc6 [2.36-9] (2.36-10 Debian:12 [amd64])\nRemv foo [1.0]\n")
	f.Add("Inst\nInst x\nInst y (\nPurg z\n")
	f.Fuzz(func(t *testing.T, out string) {
		add, changed := parseSimulation(out)
		for _, a := range add {
			if a == "" || strings.ContainsAny(a, " \t\n") {
				t.Fatalf("package %q is not one word", a)
			}
		}
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) >= 3 && f[0] == "Inst" && strings.HasPrefix(f[2], "[") {
				for _, a := range add {
					if a == f[1] || strings.HasPrefix(a, f[1]+"=") {
						t.Fatalf("upgrade of %s read as an addition", f[1])
					}
				}
				if len(changed) == 0 {
					t.Fatal("an upgrade was not reported")
				}
			}
		}
	})
}

func TestParseSimulation(t *testing.T) {
	add, changed := parseSimulation("NOTE: simulation\nInst nvidia-open (580.159.04-1 local [all])\nInst libnuma1 (2.0.16-1 Debian:12 [amd64])\nConf nvidia-open (580.159.04-1 local [all])\n")
	if strings.Join(add, " ") != "nvidia-open=580.159.04-1 libnuma1=2.0.16-1" || len(changed) != 0 {
		t.Fatalf("%v %v", add, changed)
	}
	_, changed = parseSimulation("Inst libc6 [2.36-9] (2.36-10 Debian:12 [amd64])\nRemv nouveau-firmware [1]\n")
	if strings.Join(changed, ", ") != "libc6 2.36-9, nouveau-firmware (removed)" {
		t.Fatalf("%v", changed)
	}
}

type fixedOut string

func (f fixedOut) Run(context.Context, string) (string, error) { return string(f), nil }

// The host's record is what clean trusts: whatever the host answers, vouched never panics and
// keeps an object only when its exact line is in a record the host says is present.
func FuzzVouched(f *testing.F) {
	f.Add("present\napt-package dcgm=1:3.3\ndcgm-hostengine nv-hostengine\n")
	f.Add("")
	f.Add("present")
	objs := []fleet.Object{{Kind: KindPackage, Name: "dcgm=1:3.3"}, {Kind: KindEngine, Name: "nv-hostengine"}}
	f.Fuzz(func(t *testing.T, out string) {
		keep, none, refused, err := vouched(context.Background(), fixedOut(out), "r1", objs)
		if err != nil {
			t.Fatal(err)
		}
		if len(keep)+len(none)+len(refused) != len(objs) {
			t.Fatalf("keep %v none %v refused %v", keep, none, refused)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for _, o := range keep {
			if lines[0] != "present" || !slices.Contains(lines[1:], o.Kind+" "+o.Name) {
				t.Fatalf("kept %v from %q", o, out)
			}
		}
	})
}
