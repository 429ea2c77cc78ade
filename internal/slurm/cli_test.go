package slurm

import (
	"context"
	"strings"
	"testing"
)

// A command's output is bounded (the buffers once embedded bytes.Buffer, whose ReadFrom os/exec's
// copy took instead of the bounding Write: a command could fill gpuvet's memory), and a command
// that succeeds succeeds whatever it prints on stderr past that buffer's 64 KiB.
func TestExecRunKeepsALongStderrsSuccess(t *testing.T) {
	out, err := Exec{}.Run(context.Background(), "sh", "-c", "head -c 100000 /dev/zero >&2; echo done")
	if err != nil || strings.TrimSpace(out) != "done" {
		t.Fatalf("out %q, err %v", out, err)
	}
	_, err = Exec{}.Run(context.Background(), "sh", "-c", "head -c 70000000 /dev/zero")
	if err == nil || !strings.Contains(err.Error(), "output over 64 MB") {
		t.Fatalf("70 MB of output: %v", err)
	}
	_, err = Exec{}.Run(context.Background(), "sh", "-c", "echo no such node >&2; exit 1")
	if err == nil || !strings.Contains(err.Error(), "no such node") {
		t.Fatalf("a failing command: %v", err)
	}
}
