package hostprep

import (
	"context"
	"testing"
)

type answer string

func (a answer) Run(context.Context, string) (string, error) { return string(a), nil }

// The count of packages the host could autoremove decides whether gpuvet may run autoremove after
// its purge: a count that cannot be read is unknown (never 0, which lets autoremove run).
func TestProbeUnreadableAutoremovableIsUnknown(t *testing.T) {
	for _, out := range []string{"uid=0\napt=1\nautoremovable=\n", "uid=0\napt=1\nautoremovable=sh: grep: not found\n", "uid=0\napt=1\n"} {
		p, err := probe(context.Background(), answer(out), nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.autoremovable == 0 {
			t.Errorf("%q read as nothing autoremovable", out)
		}
	}
}
