package inpod

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Run gives the subcommand the plan as -c, in a fresh working directory, and emits its result file
// between the markers even when it exits non-zero (a flagged run still measured).
func TestRunEmitsTheResultWithThePlan(t *testing.T) {
	self := filepath.Join(t.TempDir(), "gpuvet")
	// A stand-in gpuvet: `health -c FILE` copies the plan to its result file, then exits 3.
	script := "#!/bin/sh\n[ \"$1 $2\" = \"health -c\" ] || exit 9\ncp \"$3\" result.json\nexit 3\n"
	if err := os.WriteFile(self, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	plan := "models: [m]\n"
	var out, errOut bytes.Buffer
	code, err := Run(context.Background(), self, base64.StdEncoding.EncodeToString([]byte(plan)), "result.json", []string{"health"}, &out, &errOut)
	if err != nil || code != 3 {
		t.Fatalf("Run: code %d, %v; stderr %s", code, err, errOut.String())
	}
	got, err := ExtractResult(out.Bytes())
	if err != nil || string(got) != plan {
		t.Errorf("emitted %q (%v), want the plan %q", got, err, plan)
	}
	var ue *UsageError
	if _, err := Run(context.Background(), self, "not base64!", "r.json", []string{"health"}, &out, &errOut); !errors.As(err, &ue) {
		t.Errorf("a plan that is not base64: %v, want a usage error", err)
	}
	if _, err := Run(context.Background(), self, "", "", []string{"health"}, &out, &errOut); !errors.As(err, &ue) {
		t.Errorf("no --emit: %v, want a usage error", err)
	}
}

func TestCommand(t *testing.T) {
	if got, want := Command("UExBTg==", "h.json", "health", "--out", "h.json"), []string{"in-pod", "--plan", "UExBTg==", "--emit", "h.json", "--", "health", "--out", "h.json"}; !slices.Equal(got, want) {
		t.Errorf("Command: %q, want %q", got, want)
	}
	if got, want := Command("", "r.json", "probe"), []string{"in-pod", "--emit", "r.json", "--", "probe"}; !slices.Equal(got, want) {
		t.Errorf("Command without a plan: %q, want %q", got, want)
	}
}
