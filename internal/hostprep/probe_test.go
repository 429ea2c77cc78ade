package hostprep

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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

// shRunner runs a script with sh here, fake commands first on PATH.
type shRunner struct{ path string }

func (r shRunner) Run(ctx context.Context, script string) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+r.path+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	return string(out), err
}

// An autoremove simulation that fails (broken dependencies, a dpkg interrupted) says nothing about
// what the host could autoremove: unknown, not 0.
func TestProbeFailedAutoremoveSimulationIsUnknown(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "apt-get"), []byte("#!/bin/sh\necho 'E: Unmet dependencies.' >&2\nexit 100\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := probe(context.Background(), shRunner{bin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.apt || p.autoremovable == 0 {
		t.Fatalf("apt %v, autoremovable %d after a failed simulation", p.apt, p.autoremovable)
	}
}
