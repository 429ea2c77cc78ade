package k8s

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

var built struct {
	sync.Mutex
	bin string
}

// BuiltGpuvet builds gpuvet once per test process (the stand-in kubelet runs it for the pods; the
// Job tests run a Job's argv with it) and returns its path. Exported for the package's external
// tests.
func BuiltGpuvet(t testing.TB) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if built.bin != "" {
		return built.bin
	}
	dir, err := os.MkdirTemp("", "gpuvet-k8s-bin-")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "gpuvet")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/gpuvet").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	built.bin = bin
	return bin
}

// PodProblemReason is the reason gpuvet's readiness wait gives for a pod that will not start ("":
// none yet), for the real-node tests that time how soon Kubernetes reported it.
func PodProblemReason(p *corev1.Pod) string {
	if pe := podProblem(p, nil, nil); pe != nil {
		return pe.Reason
	}
	return ""
}
