package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The integration tests run `gpuvet run --backend kubernetes` against a real control plane
// (kube-apiserver, etcd, scheduler, controller-manager) with kwok's fake GPU nodes:
// scripts/k8s-test-env.sh starts it; .ci/run sets GPUVET_TEST_K8S_KUBECONFIG. Without it they skip
// and say so.

type env struct {
	kubeconfig, bin string
	cs              kubernetes.Interface
	dyn             dynamic.Interface
}

func setup(t *testing.T) *env {
	kc := os.Getenv("GPUVET_TEST_K8S_KUBECONFIG")
	if kc == "" {
		t.Skip("no test control plane: start one with `bash scripts/k8s-test-env.sh build && NODES=2 bash scripts/k8s-test-env.sh start` and set GPUVET_TEST_K8S_KUBECONFIG=$HOME/.cache/k8s-test/v1.37.2/run/kubeconfig (.ci/run does)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{kubeconfig: kc, bin: k8s.BuiltGpuvet(t)}
	e.cs = kubernetes.NewForConfigOrDie(cfg)
	e.dyn = dynamic.NewForConfigOrDie(cfg)
	nodes, err := e.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) < 2 {
		t.Fatalf("the test control plane needs 2 fake GPU nodes (NODES=2): %v nodes, %v", len(nodes.Items), err)
	}
	return e
}

// quick is a short load profile, so 16 engines finish in about a minute on a small machine.
var quick = []string{"--set", "load.max_duration=2s", "--set", "load.rates=2", "--set", "load.max_concurrency=16",
	"--set", "load.prompt_tokens=64", "--set", "load.output_tokens=32", "--set", "load.warmup=1"}

func (e *env) runArgs(out string, extra ...string) []string {
	a := []string{"run", "--backend", "kubernetes", "--kubeconfig", e.kubeconfig, "--image", "gpuvet:test",
		"--engine", "generic", "--engine-cmd", "gpuvet sim --gpu H200 --model {model} --host 0.0.0.0 --port {port}",
		"--model", "Qwen/Qwen3-8B", "--cache-size", "1Gi", "--health-args", "--sim --sim-count 8 --dcgm=false",
		"--parallel-gpus", "8", "--parallel-nodes", "2", "--out", out,
		// A pod the stand-in lost fails the run with its name within minutes, not an hour.
		"--set", "engine.ready_timeout=4m", "--set", "kubernetes.job_timeout=5m"}
	return append(append(a, quick...), extra...)
}

// gpuvet runs the built binary with a private state directory and returns its output and exit code.
func (e *env) gpuvet(t *testing.T, state string, args ...string) (string, int) {
	return e.gpuvetEnv(t, state, nil, args...)
}

// gpuvetEnv is gpuvet with extra environment variables (config keys as GPUVET_*).
func (e *env) gpuvetEnv(t *testing.T, state string, extra []string, args ...string) (string, int) {
	// No history: the runs of one test would judge each other's nodes (docs/history.md).
	return runBounded(t, gpuvetBound, append([]string{"GPUVET_STATE_DIR=" + state, "GPUVET_HISTORY_ENABLED=false"}, extra...), e.bin, args...)
}

// gpuvetBound bounds one gpuvet command of these tests: the longest takes about 2 minutes on a
// loaded 2-core machine, and a run that waits on something that never comes (an engine's 20-minute
// ready timeout, a Job's hour) would otherwise hold the whole package until go test's own timeout,
// which names no test and shows nothing of gpuvet.
const gpuvetBound = 6 * time.Minute

// runBounded runs a command with extra environment and returns its output and exit code. Past
// bound it gets SIGQUIT, so the Go runtime prints where every goroutine of gpuvet waits, and the
// test fails with that output; a child that keeps its output open is not waited on for more than
// 10 s after the command itself ends.
func runBounded(t *testing.T, bound time.Duration, extra []string, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	c := exec.CommandContext(ctx, bin, args...)
	c.Env = append(os.Environ(), extra...)
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGQUIT) }
	c.WaitDelay = 10 * time.Second
	out, err := c.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: still running after %s; its goroutines at SIGQUIT:\n%s", filepath.Base(bin), strings.Join(args, " "), bound, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func (e *env) standIn(t *testing.T, configure func(*standInKubelet)) {
	k := newStandIn(t, e.cs, e.dyn, e.bin)
	if configure != nil {
		configure(k)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { k.run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		for _, err := range k.errs {
			t.Errorf("stand-in kubelet: %s", err)
		}
	})
}

// leftovers lists what a run left: gpuvet namespaces and manifests.
func (e *env) assertNothingLeft(t *testing.T, state string) {
	t.Helper()
	ns, err := e.cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: k8s.LabelManagedBy + "=" + k8s.ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns.Items {
		t.Errorf("namespace %s (%s) left behind", n.Name, n.Status.Phase)
	}
	// A kept model cache (kubernetes.cache_namespace) stays, but nothing of a run in it.
	pods, err := e.cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: k8s.LabelManagedBy + "=" + k8s.ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("pod %s/%s left behind", p.Namespace, p.Name)
	}
	if m, _ := filepath.Glob(filepath.Join(state, "*.json")); len(m) > 0 {
		t.Errorf("run manifests left behind: %v", m)
	}
}

func TestKubernetesRunTwoNodesFlagsStraggler(t *testing.T) {
	e := setup(t)
	e.standIn(t, func(k *standInKubelet) { k.straggler = "kwok-gpu-1" })
	out, state := t.TempDir(), t.TempDir()
	start := time.Now()
	// One load per node at a time: more at once on a 2-core CI machine (beside the control plane and
	// sixteen simulators) make the load generator fall behind its schedule, and a client-limited
	// figure rightly cannot flag a node (two per node did, in 3 of 6 runs). The
	// quick profile's 2 s rungs give the synchronous rung ~4 requests and its sweep is a lower bound,
	// so the minimum sample count is lowered to let the latency figures decide.
	// Two of each node's eight GPUs serve (the health Job still vets all eight): a node's figure is
	// the median of its GPUs' either way, and eight loads one after another cost 5 minutes here.
	log, code := e.gpuvet(t, state, e.runArgs(out, "--parallel-gpus", "1", "--gpu-count", "2", "--set", "compare.min_samples=3")...)
	t.Logf("gpuvet run --backend kubernetes: exit %d in %s", code, time.Since(start).Round(time.Second))
	if code != 0 {
		t.Fatalf("exit %d (flags without --fail-on-flag exit 0):\n%s", code, log)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend != "kubernetes" || len(s.Hosts) != 2 || !s.Complete {
		t.Fatalf("backend %s, %d hosts, complete %v", s.Backend, len(s.Hosts), s.Complete)
	}
	for _, h := range s.Hosts {
		if h.Error != "" || len(h.Models) != 1 || len(h.Models[0].Endpoints) != 2 || h.Health == nil || len(h.Health.GPUs) != 8 {
			t.Fatalf("host %s: error %q, models %d, health %v\n%s", h.Name, h.Error, len(h.Models), h.Health != nil, log)
		}
		for _, ep := range h.Models[0].Endpoints {
			if ep.Error != "" || ep.Load == nil || len(ep.Verdicts) == 0 || !strings.HasPrefix(ep.URL, "http://127.77.") {
				t.Errorf("%s gpu %v: error %q, url %s, %d verdicts", h.Name, ep.GPUs, ep.Error, ep.URL, len(ep.Verdicts))
			}
		}
	}
	straggler, healthy := s.Hosts[1], s.Hosts[0]
	// On a machine too busy for the load generator the run rightly cannot tell the straggler, and
	// says so (docs/testing.md, "Rules the tests keep"): then it must be inconclusive for that reason,
	// never ok, and the healthy node never flagged.
	undecided := false
	for _, c := range s.Fleet.Comparisons {
		for _, v := range c.Values {
			undecided = undecided || v.Host == "kwok-gpu-1" && v.Inconclusive && strings.Contains(v.Reason, "client-limited")
		}
	}
	if undecided && straggler.Status == results.StatusInconclusive {
		t.Logf("the straggler is undecided on this machine, for the reason the run gives (the load generator fell behind)")
	} else if straggler.Name != "kwok-gpu-1" || straggler.Status != results.StatusFlag {
		t.Errorf("straggler node %s status %s, want flag", straggler.Name, straggler.Status)
	}
	var nodeFlags int
	for _, f := range straggler.Flags {
		if f.Check == "compare.node_to_node" {
			nodeFlags++
		}
	}
	for _, f := range healthy.Flags {
		if f.Check == "compare.node_to_node" {
			t.Errorf("healthy node %s flagged: %s", healthy.Name, f.Reason)
		}
	}
	if nodeFlags == 0 && !undecided {
		t.Errorf("no node-to-node flag on the straggler; comparisons: %+v", s.Fleet.Comparisons)
		for _, h := range s.Hosts {
			for _, ep := range h.Models[0].Endpoints {
				if ep.Load != nil && ep.Load.Client.ClientLimited {
					t.Logf("%s gpu %v client-limited: %s", h.Name, ep.GPUs, ep.Load.Client.Reason)
				}
			}
		}
	}
	for _, f := range []string{"summary.json", "report.html", "junit.xml", "ctrf.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	var ctrf struct {
		Results struct {
			Tests []struct {
				Name, Status string
				Extra        map[string]any
			}
		}
	}
	b, _ := os.ReadFile(filepath.Join(out, "ctrf.json"))
	if err := json.Unmarshal(b, &ctrf); err != nil {
		t.Fatal(err)
	}
	gates := map[string]int{}
	for _, tc := range ctrf.Results.Tests {
		if strings.HasPrefix(tc.Name, "gate.") {
			gates[fmt.Sprint(tc.Extra["node"])]++
		}
	}
	if gates["kwok-gpu-0"] < 8 || gates["kwok-gpu-1"] < 8 {
		t.Errorf("CTRF gate tests per node: %v, want ≥ 8 each (one per gate per GPU)", gates)
	}
	e.assertNothingLeft(t, state)
}

func TestKubernetesMissingDefaultStorageClass(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	scs, err := e.cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil || len(scs.Items) == 0 {
		t.Fatalf("storage classes: %v", err)
	}
	sc := scs.Items[0]
	set := func(v string) {
		cur, err := e.cs.StorageV1().StorageClasses().Get(ctx, sc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Annotations[k8s.AnnotationDefaultClass] = v
		if _, err := e.cs.StorageV1().StorageClasses().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	set("false")
	defer set("true")
	state := t.TempDir()
	log, code := e.gpuvet(t, state, e.runArgs(t.TempDir())...)
	if code != 2 || !strings.Contains(log, "no default StorageClass") || !strings.Contains(log, "--storage-class") || !strings.Contains(log, "--cache-size off") {
		t.Errorf("exit %d, want 2 naming the settings:\n%s", code, log)
	}
	e.assertNothingLeft(t, state)
}

func TestKubernetesMissingRBACPermission(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	// A user allowed everything gpuvet needs but deleting namespaces (impersonated by the admin).
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gpuvet-test-limited"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create", "get", "list"}},
		{APIGroups: []string{"", "batch", "storage.k8s.io"}, Resources: []string{"nodes", "pods", "pods/log", "jobs", "persistentvolumeclaims", "secrets", "storageclasses"}, Verbs: []string{"*"}},
	}}
	bind := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gpuvet-test-limited"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "gpuvet-limited"}}}
	e.cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	e.cs.RbacV1().ClusterRoleBindings().Create(ctx, bind, metav1.CreateOptions{})
	defer e.cs.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	defer e.cs.RbacV1().ClusterRoleBindings().Delete(ctx, bind.Name, metav1.DeleteOptions{})
	raw, err := clientcmd.LoadFromFile(e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range raw.AuthInfos {
		u.Impersonate = "gpuvet-limited"
	}
	kc := filepath.Join(t.TempDir(), "limited.kubeconfig")
	if err := clientcmd.WriteToFile(*raw, kc); err != nil {
		t.Fatal(err)
	}
	lim := *e
	lim.kubeconfig = kc
	state := t.TempDir()
	log, code := lim.gpuvet(t, state, lim.runArgs(t.TempDir())...)
	if code != 2 || !strings.Contains(log, "missing RBAC permission: delete namespaces (cluster-wide)") {
		t.Errorf("exit %d, want 2 naming the permission:\n%s", code, log)
	}
	e.assertNothingLeft(t, state)
}

// failsFast runs gpuvet with the stand-in kubelet in a failure mode and checks that every node
// failed, quickly, with an error holding each of want, and that nothing is left.
func (e *env) failsFast(t *testing.T, mode func(*standInKubelet), extra []string, want ...string) {
	e.standIn(t, mode)
	out, state := t.TempDir(), t.TempDir()
	start := time.Now()
	log, code := e.gpuvet(t, state, e.runArgs(out, extra...)...)
	took := time.Since(start)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, log)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Hosts {
		for _, w := range want {
			if !strings.Contains(h.Error, w) {
				t.Errorf("host %s error %q, want %q", h.Name, h.Error, w)
			}
		}
	}
	t.Logf("failed in %s", took.Round(100*time.Millisecond))
	if took > 90*time.Second {
		t.Errorf("took %s: a pod that cannot start must fail within seconds, not at a timeout", took)
	}
	e.assertNothingLeft(t, state)
}

func TestKubernetesUnschedulableFailsFast(t *testing.T) {
	e := setup(t)
	e.failsFast(t, func(k *standInKubelet) { k.hog = true }, nil, "Unschedulable", "Insufficient nvidia.com/gpu")
}

func TestKubernetesCrashLoopFailsFast(t *testing.T) {
	e := setup(t)
	e.failsFast(t, func(k *standInKubelet) { k.crash = true }, []string{"--set", "health.enabled=false"},
		"CrashLoopBackOff", "larger than the maximum number of tokens")
}

func TestKubernetesKillThenClean(t *testing.T) {
	e := setup(t)
	e.standIn(t, nil)
	out, state := t.TempDir(), t.TempDir()
	c := exec.Command(e.bin, e.runArgs(out, "--set", "load.max_duration=30s")...)
	c.Env = append(os.Environ(), "GPUVET_STATE_DIR="+state, "GPUVET_HISTORY_ENABLED=false")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for { // kill it once its engines and load Jobs are up
		jobs, _ := e.cs.BatchV1().Jobs("").List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelRole + "=" + k8s.RoleLoad})
		if jobs != nil && len(jobs.Items) > 0 {
			break
		}
		if time.Now().After(deadline) {
			c.Process.Kill()
			t.Fatal("no load Job within 2 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	ns, _ := e.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelManagedBy + "=" + k8s.ManagedBy})
	if ns == nil || len(ns.Items) != 1 {
		t.Fatalf("after the kill: %v gpuvet namespaces, want the run's one", ns)
	}
	runID := ns.Items[0].Labels[k8s.LabelRun]
	if m, _ := filepath.Glob(filepath.Join(state, "*.json")); len(m) != 1 {
		t.Errorf("after the kill: manifests %v, want one", m)
	}
	log, code := e.gpuvet(t, state, "clean", "--kubeconfig", e.kubeconfig, "--run", runID)
	if code != 0 || !strings.Contains(log, "deleted namespace "+ns.Items[0].Name) {
		t.Errorf("clean: exit %d:\n%s", code, log)
	}
	e.assertNothingLeft(t, state)
}
