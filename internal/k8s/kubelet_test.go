package k8s_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuvet/gpuvet/internal/k8s"
)

// standInKubelet is the node side of the integration tests. kwok fakes the nodes and moves pods to
// Running, but runs no container; this stands in for the container runtime on every fake node:
//   - an engine pod is served at its (loopback) pod IP by a local `gpuvet sim` started with the
//     pod's own command line (the engine template), with --straggler on the straggler node;
//   - a gpuvet Job pod (load, health) runs its own command line with the local gpuvet binary; its
//     output becomes the pod's log (through a kwok Logs object) and its end the pod's Succeeded;
//   - a cache-populate pod is completed without downloading (no hub is reachable here);
//   - modes inject the failures a real node shows: a crash-looping engine, GPUs taken by another
//     workload between node choice and pod creation.
type standInKubelet struct {
	t         *testing.T
	cs        kubernetes.Interface
	dyn       dynamic.Interface
	bin, dir  string
	straggler string // node whose engines run slower
	crash     bool   // engine pods crash-loop
	hog       bool   // take every GPU of every node when the run's cache Job starts
	// badCompletion is a node whose engines answer /health but fail every completion (HTTP 500).
	badCompletion string
	// badGPU is a node whose health Job finds GPU 0 computing wrong answers (the simulator's
	// --sim-corrupt 0): evidence about a GPU, what a taint acts on.
	badGPU string
	// fastNode is a node whose health Job runs without the simulator's node-wide slowdown
	// (--sim-node-slowdown-pct, which the run's --health-args give every node): the sibling beside
	// which a real node is seen slow.
	fastNode string

	mu      sync.Mutex
	handled map[types.UID]bool
	procs   map[types.UID]*engineProc
	hogs    []string
	errs    []string
	stopped bool // no engine starts once the stand-in has stopped
}

var logsGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}

func newStandIn(t *testing.T, cs kubernetes.Interface, dyn dynamic.Interface, bin string) *standInKubelet {
	return &standInKubelet{t: t, cs: cs, dyn: dyn, bin: bin, dir: t.TempDir(), handled: map[types.UID]bool{}, procs: map[types.UID]*engineProc{}}
}

// engineProc is an engine pod's container: its process, closed exited once it has ended, and what
// it printed (why it ended, when that was early).
type engineProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	killed atomic.Bool // its pod went: its end is no failure
	ip     string      // the pod address it listens on
	out    bytes.Buffer
}

// startEngine starts an engine's process; its end is reaped and closes exited.
func startEngine(argv []string) (*engineProc, error) {
	e := &engineProc{cmd: exec.Command(argv[0], argv[1:]...), exited: make(chan struct{})}
	e.cmd.Stdout, e.cmd.Stderr = &e.out, &e.out
	e.cmd.WaitDelay = 10 * time.Second
	if err := e.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { e.cmd.Wait(); close(e.exited) }()
	return e, nil
}

// kill ends the process and waits until it is reaped.
func (e *engineProc) kill() {
	e.killed.Store(true)
	e.cmd.Process.Kill()
	<-e.exited
}

// tail is the last lines it printed (after it ended: the buffer is written by Wait's copy until then).
func (e *engineProc) tail() string {
	lines := strings.Split(strings.TrimRight(e.out.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// run serves pods until ctx ends, then stops every process it started and removes its hog pods.
func (k *standInKubelet) run(ctx context.Context) {
	defer k.stop()
	for ctx.Err() == nil {
		pods, err := k.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelManagedBy + "=" + k8s.ManagedBy})
		if err == nil {
			live := map[types.UID]bool{}
			for i := range pods.Items {
				live[pods.Items[i].UID] = pods.Items[i].DeletionTimestamp == nil
			}
			// The pod is gone: so is its container, before any new pod is served. kwok gives a new
			// pod the address of one just deleted, and an engine still listening there made the new
			// one fail to bind (the pod then never became Ready: last stop's CI hang).
			k.mu.Lock()
			for uid, c := range k.procs {
				if !live[uid] {
					c.kill()
					delete(k.procs, uid)
				}
			}
			k.mu.Unlock()
			for i := range pods.Items {
				p := &pods.Items[i]
				// kwok's nodes only: beside the real kubelet (realnode tests) its pods are its own.
				if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil &&
					strings.HasPrefix(nodeOf(p), "kwok-") && !k.seen(p.UID) {
					go k.serve(ctx, p.DeepCopy())
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(150 * time.Millisecond):
		}
	}
}

func (k *standInKubelet) seen(uid types.UID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.handled[uid] {
		return true
	}
	k.handled[uid] = true
	return false
}

func (k *standInKubelet) fail(format string, a ...any) {
	k.mu.Lock()
	k.errs = append(k.errs, fmt.Sprintf(format, a...))
	k.mu.Unlock()
}

func (k *standInKubelet) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	for _, c := range k.procs {
		c.kill()
	}
	k.procs = map[types.UID]*engineProc{}
	ctx := context.Background()
	for _, h := range k.hogs {
		zero := int64(0)
		k.cs.CoreV1().Pods("default").Delete(ctx, h, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	for _, h := range k.hogs { // gone before the next test chooses nodes
		for i := 0; i < 100; i++ {
			if _, err := k.cs.CoreV1().Pods("default").Get(ctx, h, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// argv is the pod's command line with gpuvet's image path mapped to the local binary.
func (k *standInKubelet) argv(p *corev1.Pod) []string {
	c := p.Spec.Containers[0]
	a := append(append([]string{}, c.Command...), c.Args...)
	if a[0] == k8s.GpuvetBinary {
		a[0] = k.bin
	}
	return a
}

func (k *standInKubelet) serve(ctx context.Context, p *corev1.Pod) {
	switch p.Labels[k8s.LabelRole] {
	case k8s.RoleEngine:
		if k.crash {
			k.crashLoop(ctx, p)
			return
		}
		a := k.argv(p)
		for i := 0; i+1 < len(a); i++ {
			if a[i] == "--host" {
				a[i+1] = p.Status.PodIP
			}
		}
		if nodeOf(p) == k.straggler {
			a = append(a, "--straggler", "0", "--straggler-pct", "50")
		}
		if nodeOf(p) == k.badCompletion {
			a = append(a, "--fault-5xx", "1")
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.stopped { // the test is over: a process started now would outlive it
			return
		}
		for uid, old := range k.procs { // an engine of an older pod at this address (it went between two looks)
			if old.ip == p.Status.PodIP {
				old.kill()
				delete(k.procs, uid)
			}
		}
		c, err := startEngine(a)
		if err != nil {
			k.fail("engine %s: %v", p.Name, err)
			return
		}
		c.ip = p.Status.PodIP
		k.procs[p.UID] = c
		go k.probeReady(ctx, p, c)
	case k8s.RoleCache:
		if k.hog {
			k.takeAllGPUs(ctx)
		}
		k.complete(ctx, p, []byte("cache pull: stand-in kubelet, nothing downloaded\n"), 0)
	default: // load, health: gpuvet itself
		a := k.argv(p)
		if p.Labels[k8s.LabelRole] == k8s.RoleHealth && nodeOf(p) == k.badGPU {
			a = append(a, "--sim-corrupt", "0")
		}
		if p.Labels[k8s.LabelRole] == k8s.RoleHealth && nodeOf(p) == k.fastNode {
			a = withoutFlag(a, "--sim-node-slowdown-pct")
		}
		var out bytes.Buffer
		c := exec.CommandContext(ctx, a[0], a[1:]...)
		c.Stdout, c.Stderr = &out, &out
		c.WaitDelay = 10 * time.Second // a child left holding the output must not hold the pod
		c.Env = append(os.Environ(), "TMPDIR="+k.podDir(p))
		code := 0
		if err := runAhead(c); err != nil {
			code = 1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		k.complete(ctx, p, out.Bytes(), code)
	}
}

// runAhead runs a load or health Job's gpuvet ahead of the rest of the machine (nice −5, where the
// test may set it: root): on a real node the Job has CPUs of its own, and here it shares two cores
// with the engines it loads, the control plane and the go test's other packages. Behind them the
// shared client fell behind its schedule in CI, and a client-limited run rightly flags no straggler
// (README), which is not what these tests are about.
func runAhead(c *exec.Cmd) error {
	if err := c.Start(); err != nil {
		return err
	}
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, c.Process.Pid, -5) // not root: as it is
	return c.Wait()
}

// withoutFlag is argv without the flag name and its value (as two words or as name=value).
func withoutFlag(argv []string, name string) []string {
	var out []string
	for i := 0; i < len(argv); i++ {
		switch {
		case argv[i] == name:
			i++
		case strings.HasPrefix(argv[i], name+"="):
		default:
			out = append(out, argv[i])
		}
	}
	return out
}

func nodeOf(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	return ""
}

func (k *standInKubelet) podDir(p *corev1.Pod) string {
	d := filepath.Join(k.dir, p.Namespace, p.Name)
	os.MkdirAll(d, 0o755)
	return d
}

// gone reports whether the pod was deleted (its run ended or was cleaned meanwhile).
func (k *standInKubelet) gone(ctx context.Context, p *corev1.Pod) bool {
	cur, err := k.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && cur.DeletionTimestamp != nil) || ctx.Err() != nil {
		return true
	}
	// A namespace being deleted (gpuvet clean, a finished run) refuses new content before its pods
	// are marked deleted: the pod is on its way out too.
	ns, err := k.cs.CoreV1().Namespaces().Get(ctx, p.Namespace, metav1.GetOptions{})
	return apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil)
}

// setLogs points the pod's log at a file of CRI-format lines with the given text.
func (k *standInKubelet) setLogs(ctx context.Context, p *corev1.Pod, text []byte) error {
	var b strings.Builder
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	for _, l := range strings.Split(strings.TrimRight(string(text), "\n"), "\n") {
		fmt.Fprintf(&b, "%s stdout F %s\n", ts, l)
	}
	f := filepath.Join(k.podDir(p), "pod.log")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
		"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace},
		"spec":     map[string]any{"logs": []any{map[string]any{"containers": []any{p.Spec.Containers[0].Name}, "logsFile": f, "previousLogsFile": f}}},
	}}
	_, err := k.dyn.Resource(logsGVR).Namespace(p.Namespace).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// kwok picks the Logs object up through its informer: wait until the log reads back (up to
	// 30 s: on a loaded machine its informer lags).
	for i := 0; i < 300 && ctx.Err() == nil; i++ {
		got, err := k.cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err == nil && len(got) > 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kwok did not serve the log of %s", p.Name)
}

// complete publishes the output as the pod's log, then ends the pod with the exit code.
func (k *standInKubelet) complete(ctx context.Context, p *corev1.Pod, out []byte, code int) {
	if err := k.setLogs(ctx, p, out); err != nil && !k.gone(ctx, p) {
		k.fail("logs of %s: %v", p.Name, err)
	}
	phase, reason := corev1.PodSucceeded, "Completed"
	if code != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	k.patchStatus(ctx, p, func(st *corev1.PodStatus) {
		st.Phase = phase
		now := metav1.Now()
		for i := range st.ContainerStatuses {
			st.ContainerStatuses[i].Ready = false
			st.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, FinishedAt: now}}
		}
		for i := range st.Conditions {
			if st.Conditions[i].Type == corev1.PodReady || st.Conditions[i].Type == corev1.ContainersReady {
				st.Conditions[i].Status = corev1.ConditionFalse
			}
		}
	})
}

// probeReady is the readiness probe: once the engine answers GET /health, the pod is Ready.
// An engine that ends before it answers is a stand-in failure, named at once (with what it printed):
// otherwise the run would wait out engine.ready_timeout for a pod that can never be Ready.
func (k *standInKubelet) probeReady(ctx context.Context, p *corev1.Pod, c *engineProc) {
	url := fmt.Sprintf("http://%s:%d/health", p.Status.PodIP, k8s.EnginePort)
	for ctx.Err() == nil {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-c.exited:
			if ctx.Err() == nil && !c.killed.Load() {
				k.fail("engine %s ended before it answered /health (%v):\n%s", p.Name, c.cmd.ProcessState, c.tail())
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	k.patchStatus(ctx, p, func(st *corev1.PodStatus) {
		for i := range st.ContainerStatuses {
			st.ContainerStatuses[i].Ready = true
		}
		for i := range st.Conditions {
			if st.Conditions[i].Type == corev1.PodReady || st.Conditions[i].Type == corev1.ContainersReady {
				st.Conditions[i].Status = corev1.ConditionTrue
			}
		}
	})
}

// crashLoop shows what a kubelet shows for an engine that exits at start, again and again.
func (k *standInKubelet) crashLoop(ctx context.Context, p *corev1.Pod) {
	if err := k.setLogs(ctx, p, []byte("INFO loading model\nValueError: the model's max seq len (40960) is larger than the maximum number of tokens that can be stored in KV cache\n")); err != nil {
		k.fail("logs of %s: %v", p.Name, err)
	}
	k.patchStatus(ctx, p, func(st *corev1.PodStatus) {
		for i := range st.ContainerStatuses {
			cs := &st.ContainerStatuses[i]
			cs.Ready, cs.RestartCount = false, 4
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 1m20s restarting failed container"}}
			cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
		}
		for i := range st.Conditions {
			if st.Conditions[i].Type == corev1.PodReady || st.Conditions[i].Type == corev1.ContainersReady {
				st.Conditions[i].Status = corev1.ConditionFalse
			}
		}
	})
}

// An update lost here is a pod that never becomes Ready or never ends, which the run would wait
// out for its whole timeout: so it is tried for a minute (conflicts with kwok's own updates, an API
// server slow on a loaded machine), and a failure names the last error.
func (k *standInKubelet) patchStatus(ctx context.Context, p *corev1.Pod, edit func(*corev1.PodStatus)) {
	var last error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		cur, err := k.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err == nil {
			edit(&cur.Status)
			if _, err = k.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil {
				return
			}
		}
		last = err
	}
	if !k.gone(ctx, p) {
		k.fail("status of %s not updated within a minute: %v", p.Name, last)
	}
}

// takeAllGPUs binds a pod holding every GPU to each node, as another workload would between
// gpuvet's node choice and its pods.
func (k *standInKubelet) takeAllGPUs(ctx context.Context) {
	nodes, err := k.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		k.fail("nodes: %v", err)
		return
	}
	for _, n := range nodes.Items {
		q := n.Status.Allocatable[k8s.GPUResource]
		name := "hog-" + n.Name
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "hog", Image: "hog",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{k8s.GPUResource: q}, Requests: corev1.ResourceList{k8s.GPUResource: q}}}}}}
		if _, err := k.cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			k.fail("hog: %v", err)
			continue
		}
		k.mu.Lock()
		k.hogs = append(k.hogs, name)
		k.mu.Unlock()
	}
	time.Sleep(time.Second) // let the scheduler's cache see them
}
