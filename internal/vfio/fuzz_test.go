package vfio

import (
	"context"
	"strings"
	"testing"
)

// A manifest may be edited: whatever a binding's name says, parseBinding accepts only a PCI
// address and a known override kind, and what it accepts reads back as the same name.
func FuzzParseBinding(f *testing.F) {
	f.Add("0000:41:00.0 driver=vfio-pci override=persistent")
	f.Add("0000:41:00.0; rm -rf / driver=vfio-pci override=none")
	f.Fuzz(func(t *testing.T, name string) {
		g, err := parseBinding(name)
		if err != nil {
			return
		}
		if !pciAddr(g.Address) || strings.ContainsAny(g.Address, " ;'$`") {
			t.Fatalf("accepted address %q", g.Address)
		}
		if bindingName(g) != strings.Join(strings.Fields(name), " ") {
			t.Fatalf("%q read back as %q", name, bindingName(g))
		}
	})
}

type fixed string

func (f fixed) Run(context.Context, string) (string, error) { return string(f), nil }

// Inspect reads the node's script output: lines it cannot read are left out, (null) is no override.
func FuzzInspect(f *testing.F) {
	f.Add("0000:41:00.0|vfio-pci|vfio-pci|vfio-pci|21\n0000:c1:00.0||(null)||\n")
	f.Add("garbage\n|||||\n")
	f.Fuzz(func(t *testing.T, out string) {
		gpus, err := Inspect(context.Background(), fixed(out), Paths{})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gpus {
			if g.Override == "(null)" || strings.Contains(g.Address, "|") {
				t.Fatalf("%+v", g)
			}
		}
	})
}

// The node's record is what a restore trusts: whatever the node answers, readRecord never panics,
// a record is present only when the node says so first, and restore vouches for an object only
// when its exact line is in the record.
func FuzzReadRecord(f *testing.F) {
	f.Add("present\nvfio-binding 0000:41:00.0 driver=vfio-pci override=persistent\nvfio-persistenced nvidia-persistenced\n")
	f.Add("")
	f.Add("presentx\n\n\n")
	f.Fuzz(func(t *testing.T, out string) {
		lines, present, err := readRecord(context.Background(), fixed(out), Paths{}.orDefault(), "r1")
		if err != nil {
			t.Fatal(err)
		}
		if present != strings.HasPrefix(strings.TrimSpace(out), "present\n") && present != (strings.TrimSpace(out) == "present") {
			t.Fatalf("present %v for %q", present, out)
		}
		for _, l := range lines {
			if strings.Contains(l, "\n") {
				t.Fatalf("line %q", l)
			}
		}
	})
}
