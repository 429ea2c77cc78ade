package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The load Jobs get the resolved plan as YAML (-c): it must load back to the same configuration.
func TestPlanYAMLRoundTrip(t *testing.T) {
	p, err := config.Load(config.Options{Sets: []string{"load.max_duration=7s", "gates.ttft_p95_ms=null", "engine.env.FOO=bar",
		"reference.NVIDIA H200.Qwen/Qwen3-8B.ttft_p95_ms=90"},
		Flags: []config.Flag{{Name: "--backend", Path: "backend", Value: "kubernetes"}, {Name: "--model", Path: "models", Value: "Qwen/Qwen3-8B"},
			{Name: "--image", Path: "kubernetes.image", Value: "reg/gpuvet:v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "plan.yaml")
	os.WriteFile(f, b, 0o600)
	q, err := config.Load(config.Options{Files: []string{f}})
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(p.Config, q.Config) {
		t.Errorf("plan changed through YAML:\n%+v\n%+v", p.Config, q.Config)
	}
}

// asGpuvet runs the test binary as gpuvet and returns its stdout, stderr and exit code.
func asGpuvet(t *testing.T, args ...string) (string, string, int) {
	self, _ := os.Executable()
	c := exec.Command(self, args...)
	c.Env = append(os.Environ(), "GPUVET_TEST_AS_GPUVET=1", "GPUVET_STATE_DIR="+t.TempDir())
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// Bad Kubernetes settings, from flags, --set or GPUVET_* alike, exit 2 naming the key before any
// cluster is contacted.
func TestRunKubernetesBadInputExit2(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  []string
		want []string
	}{
		{args: []string{"--tolerations", "=x"}, want: []string{"kubernetes.tolerations", "flag:--tolerations", "no key"}},
		{env: []string{"GPUVET_KUBERNETES_TOLERATIONS=gpu:Never"}, want: []string{"kubernetes.tolerations", "env:GPUVET_KUBERNETES_TOLERATIONS", "effect"}},
		{args: []string{"--node-selector", "a in (b"}, want: []string{"kubernetes.node_selector", "label selector"}},
		{args: []string{"--parallel-nodes", "0"}, want: []string{"kubernetes.parallel_nodes", "--parallel-nodes"}},
		{args: []string{"--cache-size", "lots"}, want: []string{"model_cache.size", "100Gi, or off"}},
		{env: []string{"GPUVET_MODEL_CACHE_ACCESS_MODE=shared"}, want: []string{"model_cache.access_mode", "ReadWriteMany"}},
		{args: []string{"--set", "kubernetes.health_args='--burn"}, want: []string{"kubernetes.health_args"}},
		{args: []string{"--image", ""}, want: []string{"kubernetes.image", "ko build"}},
		{args: []string{"--kubeconfig", "/nonexistent/kubeconfig"}, want: []string{"--kubeconfig /nonexistent/kubeconfig"}},
		{env: []string{"GPUVET_KUBERNETES_KUBECONFIG=/nonexistent/kc"}, want: []string{"/nonexistent/kc"}},
	} {
		args := append([]string{"run", "--backend", "kubernetes", "--image", "reg/gpuvet:v1", "--model", "Qwen/Qwen3-8B", "--out", t.TempDir()}, c.args...)
		for _, e := range c.env {
			t.Setenv(strings.Split(e, "=")[0], strings.SplitN(e, "=", 2)[1])
		}
		_, stderr, code := asGpuvet(t, args...)
		for _, e := range c.env {
			os.Unsetenv(strings.Split(e, "=")[0])
		}
		for _, w := range c.want {
			if code != exitBadUsage || !strings.Contains(stderr, w) {
				t.Errorf("%v %v: exit %d, %q: want 2 naming %s", c.args, c.env, code, stderr, w)
			}
		}
	}
}

// in-pod prints the subcommand's result between markers, where the CLI reads it back.
func TestInPodEmitsResult(t *testing.T) {
	f := filepath.Join(t.TempDir(), "health.json")
	stdout, stderr, code := asGpuvet(t, "in-pod", "--emit", f, "--", "health", "--sim", "--sim-gpus", "2", "--dcgm=false", "--out", f)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := k8s.ExtractResult([]byte(stdout))
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	var h results.Health
	if err := json.Unmarshal(b, &h); err != nil || len(h.GPUs) != 2 || h.Source != "sim" {
		t.Errorf("health from the log: %v, %d GPUs, source %q", err, len(h.GPUs), h.Source)
	}
	if _, stderr, code := asGpuvet(t, "in-pod", "--emit", f+".none", "--", "health", "--sim", "--sim-gpus", "1", "--dcgm=false"); code != exitFailed || !strings.Contains(stderr, "the command ended: exit status 0") {
		t.Errorf("no result file: exit %d, want 1, saying the command exited 0:\n%s", code, stderr)
	}
}

// probe reports each server's tokens or its response's error, and exits 1 when one failed.
func TestProbeReportsCompletionError(t *testing.T) {
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"choices":[{"message":{"content":"OK"}}],"usage":{"completion_tokens":2}}`)
	}))
	defer good.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		fmt.Fprint(w, `{"object":"error","message":"CUDA error: an illegal memory access"}`)
	}))
	defer bad.Close()
	f := filepath.Join(t.TempDir(), "ready.json")
	stdout, stderr, code := asGpuvet(t, "probe", "--model", "m", "--url", good.URL, "--url", bad.URL, "--wait", "1s", "--out", f)
	if code != exitFailed || !strings.Contains(stdout, "2 token(s)") || !strings.Contains(stdout, "illegal memory access") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var res []k8s.CompletionCheck
	b, _ := os.ReadFile(f)
	if err := json.Unmarshal(b, &res); err != nil || len(res) != 2 || res[0].Tokens != 2 || res[0].Error != "" ||
		!strings.Contains(res[1].Error, "HTTP 500") || res[1].Seconds < 1 {
		t.Errorf("%v %+v", err, res)
	}
}
