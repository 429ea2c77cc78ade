package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The verdict flags set their config keys (above files, --set and GPUVET_*), and `clean --untaint`
// goes with backend kubernetes only: another backend is bad input (exit 2), before anything runs.
func TestVerdictFlagsAndUntaintInput(t *testing.T) {
	out, err := gpuvet("config", "show", "--backend", "kubernetes", "--image", "img", "--label-nodes", "--taint-flagged").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"kubernetes.label_nodes = true", "kubernetes.taint_flagged = true", "kubernetes.taint_failed = false"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("config show lacks %q:\n%s", w, out)
		}
	}
	cmd := gpuvet("clean", "--untaint", "--backend", "ssh")
	cmd.Env = append(cmd.Env, "GPUVET_STATE_DIR="+t.TempDir())
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), "--untaint lifts taints from Kubernetes nodes") {
		t.Errorf("clean --untaint --backend ssh: %v\n%s", err, b)
	}
}
