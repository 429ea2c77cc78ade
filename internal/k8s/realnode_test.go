package k8s_test

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The real-node tests run `gpuvet run --backend kubernetes` against a real kubelet (containerd,
// runc, CNI bridge) that scripts/k8s-real-node/setup.sh starts in a network namespace of its own,
// next to the loopback control plane: real containers of gpuvet's image (built from this checkout,
// no registry), real pod IPs, real logs, a real hostPath volume that comes up root:root 0755. They
// run inside that namespace (`setup.sh exec`), where .ci/run sets GPUVET_TEST_K8S_REAL_KUBECONFIG.
// What a single real node cannot show (many nodes, taints, unschedulable, RWX provisioners, Dynamo's
// operator) stays with the kwok tests.

const (
	realNode  = "real-gpu-0"
	realImage = "gpuvet.local/gpuvet:dev" // setup.sh images
)

func setupReal(t *testing.T) *env {
	kc := os.Getenv("GPUVET_TEST_K8S_REAL_KUBECONFIG")
	if kc == "" {
		t.Skip("no real Kubernetes node: as root, `bash scripts/k8s-real-node/setup.sh build && bash scripts/k8s-real-node/setup.sh images && " +
			"bash scripts/k8s-real-node/setup.sh start`, then run the tests inside its network namespace: " +
			"`bash scripts/k8s-real-node/setup.sh exec env GPUVET_TEST_K8S_REAL_KUBECONFIG=$HOME/.cache/k8s-real/cp/run/kubeconfig go test ./internal/k8s/ -run RealNode` (.ci/run does)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{kubeconfig: kc, bin: k8s.BuiltGpuvet(t), cs: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
	n, err := e.cs.CoreV1().Nodes().Get(context.Background(), realNode, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the real node %s: %v (is scripts/k8s-real-node/setup.sh started?)", realNode, err)
	}
	if q := n.Status.Allocatable[k8s.GPUResource]; q.Value() != 8 {
		t.Fatalf("node %s advertises %s nvidia.com/gpu, want 8", realNode, q.String())
	}
	return e
}

// realArgs is a run on the real node: gpuvet's image, its simulator as the engine, the quick load.
func (e *env) realArgs(out, engineCmd string, extra ...string) []string {
	if engineCmd == "" {
		engineCmd = "gpuvet sim --gpu H200 --model {model} --host 0.0.0.0 --port {port}"
	}
	a := []string{"run", "--backend", "kubernetes", "--kubeconfig", e.kubeconfig, "--image", realImage,
		"--engine", "generic", "--engine-cmd", engineCmd, "--model", "Qwen/Qwen3-8B",
		"--health-args", "--sim --sim-count 8 --dcgm=false", "--parallel-gpus", "8", "--out", out}
	return append(append(a, quick...), extra...)
}

// nodeHub is a small Hugging Face-compatible hub on the node's network (the namespace's node IP,
// which pods reach through the bridge): the revision and tree APIs and the resolve endpoint, as
// internal/modelcache reads them. offline makes it answer 503 and count what still asks.
type nodeHub struct {
	url, model, commit string
	files              map[string][]byte

	mu        sync.Mutex
	served    int64
	requests  int
	resolves  int // file requests (GET or HEAD of /{id}/resolve/…)
	offline   bool
	offlineAt int // requests that arrived while offline
}

func startNodeHub(t *testing.T, model string, files map[string][]byte) *nodeHub {
	ip := os.Getenv("GPUVET_TEST_K8S_REAL_NODE_IP")
	if ip == "" {
		ip = "10.89.0.1" // setup.sh's NODE_IP
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("the fake hub cannot listen on the node's address %s: %v (are the tests running inside the node's network namespace?)", ip, err)
	}
	h := &nodeHub{url: "http://" + ln.Addr().String(), model: model, commit: fmt.Sprintf("%040x", 0xc0ffee), files: files}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return h
}

func gitBlob(b []byte) string {
	s := sha1.New()
	fmt.Fprintf(s, "blob %d\x00", len(b))
	s.Write(b)
	return hex.EncodeToString(s.Sum(nil))
}

func (h *nodeHub) total() (n int64) {
	for _, b := range h.files {
		n += int64(len(b))
	}
	return n
}

func (h *nodeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests++
	if h.offline {
		h.offlineAt++
		h.mu.Unlock()
		http.Error(w, "hub offline", http.StatusServiceUnavailable)
		return
	}
	h.mu.Unlock()
	paths := make([]string, 0, len(h.files))
	for p := range h.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	api := "/api/models/" + h.model + "/"
	switch {
	case strings.HasPrefix(r.URL.Path, api+"revision/"):
		var sib []map[string]string
		for _, p := range paths {
			sib = append(sib, map[string]string{"rfilename": p})
		}
		json.NewEncoder(w).Encode(map[string]any{"id": h.model, "sha": h.commit, "gated": false, "private": false, "siblings": sib})
	case strings.HasPrefix(r.URL.Path, api+"tree/"):
		var entries []map[string]any
		for _, p := range paths {
			entries = append(entries, map[string]any{"type": "file", "path": p, "size": len(h.files[p]), "oid": gitBlob(h.files[p])})
		}
		json.NewEncoder(w).Encode(entries)
	case strings.HasPrefix(r.URL.Path, "/"+h.model+"/resolve/"):
		h.mu.Lock()
		h.resolves++
		h.mu.Unlock()
		_, p, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"+h.model+"/resolve/"), "/")
		b, ok := h.files[p]
		if !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, p+" does not exist", http.StatusNotFound)
			return
		}
		w.Header().Set("X-Repo-Commit", h.commit)
		w.Header().Set("ETag", `"`+gitBlob(b)+`"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if r.Method == http.MethodHead {
			return
		}
		n, _ := w.Write(b)
		h.mu.Lock()
		h.served += int64(n)
		h.mu.Unlock()
	default:
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "Repository not found", http.StatusNotFound)
	}
}

func (h *nodeHub) goOffline() {
	h.mu.Lock()
	h.offline = true
	h.mu.Unlock()
}

// reset takes the hub back online with its counters at zero (the next run's figures).
func (h *nodeHub) reset() {
	h.mu.Lock()
	h.offline, h.served, h.requests, h.resolves, h.offlineAt = false, 0, 0, 0, 0
	h.mu.Unlock()
}

// cacheWatch records, while a run goes, what the populate and engine pods show: the init
// container's log, the volume behind the cache PVC, the engines' mounts and environment; and takes
// the hub offline once every populate Job has succeeded.
type cacheWatch struct {
	mu                sync.Mutex
	ownerLog, pvPath  string
	pvHostPath        bool
	engines           map[string]string // pod -> "ro HF_HUB_OFFLINE=1 HF_HOME=/cache" as seen
	populateHub       string            // HF_ENDPOINT the populate Job got
	populateSucceeded bool
	stop              func()
}

func (e *env) watchCache(t *testing.T, hub *nodeHub) *cacheWatch {
	w := &cacheWatch{engines: map[string]string{}}
	w.stop = e.pollPods(t, k8s.LabelManagedBy+"="+k8s.ManagedBy, func(pods []corev1.Pod) {
		for _, p := range pods {
			switch p.Labels[k8s.LabelRole] {
			case k8s.RoleCache:
				w.seePopulate(context.Background(), e.cs, &p, hub)
			case k8s.RoleEngine:
				w.seeEngine(&p)
			}
		}
	})
	return w
}

func (w *cacheWatch) end() { w.stop() }

// pollPods lists the pods selector matches every 200 ms and hands them to see, until the returned
// stop is called (or the test ends); stop waits for the poller to be done.
func (e *env) pollPods(t *testing.T, selector string, see func([]corev1.Pod)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if pods, err := e.cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: selector}); err == nil {
				see(pods.Items)
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit) }); <-done }
	t.Cleanup(stop)
	return stop
}

func (w *cacheWatch) seePopulate(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, hub *nodeHub) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range p.Spec.Containers[0].Env {
		if ev.Name == "HF_ENDPOINT" {
			w.populateHub = ev.Value
		}
	}
	if w.pvPath == "" {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			pvc, err := cs.CoreV1().PersistentVolumeClaims(p.Namespace).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
			if err != nil || pvc.Spec.VolumeName == "" {
				continue
			}
			if pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{}); err == nil && pv.Spec.HostPath != nil {
				w.pvPath, w.pvHostPath = pv.Spec.HostPath.Path, true
			}
		}
	}
	if w.ownerLog == "" {
		for _, s := range p.Status.InitContainerStatuses {
			if s.State.Terminated != nil {
				b, _ := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: s.Name}).DoRaw(ctx)
				w.ownerLog = strings.TrimSpace(string(b))
			}
		}
	}
	if p.Status.Phase == corev1.PodSucceeded && !w.populateSucceeded {
		w.populateSucceeded = true
		hub.goOffline() // the engines must need no hub
	}
}

func (w *cacheWatch) seeEngine(p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := p.Spec.Containers[0]
	var got []string
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/cache" && m.ReadOnly {
			got = append(got, "ro")
		}
	}
	for _, ev := range c.Env {
		if ev.Name == "HF_HUB_OFFLINE" || ev.Name == "HF_HOME" {
			got = append(got, ev.Name+"="+ev.Value)
		}
	}
	sort.Strings(got)
	w.engines[p.Name] = strings.Join(got, " ")
}

// TestRealNodeModelCache is the model cache end to end on a real kubelet: the populate Job fills a
// hostPath volume that comes up root:root 0755 (its init container hands the root to uid 65532),
// downloading from a hub mirror on the node's network (model_cache.endpoint); the hub then goes
// offline, and the eight engine pods start from the cache, mounted read-only with HF_HUB_OFFLINE=1:
// each engine's command reads a file of the cached snapshot (a catalog file), so a pod whose cache
// is missing or unreadable crash-loops and fails the run. The cache is kept in its namespace
// (kubernetes.cache_namespace): a second run finds the same volume and transfers nothing (no file
// request reaches the hub, the populate Job says it downloaded 0 B); `gpuvet clean --cache` then
// removes it.
func TestRealNodeModelCache(t *testing.T) {
	e := setupReal(t)
	weights := make([]byte, 3<<20)
	rand.Read(weights)
	files := map[string][]byte{
		"config.json":           []byte(`{"architectures":["Qwen3ForCausalLM"]}`),
		"gpuvet-catalog.yaml":   []byte("models: []\n"),
		"model.safetensors":     weights,
		"tokenizer_config.json": []byte(`{}`),
	}
	hub := startNodeHub(t, "Qwen/Qwen3-8B", files)
	snapshot := "/cache/hub/models--Qwen--Qwen3-8B/snapshots/" + hub.commit
	engineCmd := "gpuvet sim --gpu H200 --model {model} --catalog " + snapshot + "/gpuvet-catalog.yaml --host 0.0.0.0 --port {port}"
	e.cleanCache(t) // a fresh, root-owned volume: whatever an earlier test kept goes first
	defer e.cleanCache(t)
	// The cache is under test, not the load: each engine's load is its synchronous rung alone, not a
	// sweep (in CI the 8 load Jobs' sweeps, at a CPU weight of 64 beside the go test, took 130-360 s
	// each sized for 30 samples, and past 6 minutes for one gpuvet command sized for 3).
	// Two engines: each reads the one kept volume as eight would, and eight at a CPU weight of 64
	// beside the go test's parallel runs were once too starved to answer /tokenize.
	args := e.realArgs("", engineCmd, "--cache-size", "1Gi", "--hub-endpoint", hub.url, "--set", "compare.min_samples=3",
		"--set", "load.profile=synchronous", "--gpu-count", strconv.Itoa(cacheGPUs))
	first := e.realCacheRun(t, hub, args)
	if !strings.Contains(first.ownerLog, "was uid 0 gid 0 mode 0755, now uid 65532 gid 65532") {
		t.Errorf("the populate Job's init container log %q: want the volume handed from root:root 0755 to 65532", first.ownerLog)
	}
	if first.served != hub.total() || first.resolves == 0 {
		t.Errorf("the hub served %d bytes in %d file requests, want the model once (%d)", first.served, first.resolves, hub.total())
	}
	if !strings.Contains(first.log, "model cache namespace gpuvet-cache created") {
		t.Errorf("the first run does not say it created the cache namespace:\n%s", first.log)
	}
	// The second run: the same kept PVC, and no file leaves the hub.
	hub.reset()
	second := e.realCacheRun(t, hub, args)
	if second.resolves != 0 || second.served != 0 {
		t.Errorf("the second run made %d file requests to the hub (%d bytes): the kept cache must serve it", second.resolves, second.served)
	}
	if !strings.Contains(second.log, "model cache: reusing PVC gpuvet-cache/cache-real-gpu-0") {
		t.Errorf("the second run does not say it reuses the kept PVC:\n%s", second.log)
	}
	if !regexp.MustCompile(`model cache: Qwen/Qwen3-8B@[0-9a-f]{40}: 4 files, [0-9.]+ MiB; downloaded 0 B`).MatchString(second.log) {
		t.Errorf("the second run's populate Job does not report 0 B downloaded:\n%s", second.log)
	}
	if first.pvPath == "" || second.pvPath != first.pvPath {
		t.Errorf("the second run's cache volume %q, want the first run's %q", second.pvPath, first.pvPath)
	}
	ctx := context.Background()
	if _, err := e.cs.CoreV1().PersistentVolumeClaims("gpuvet-cache").Get(ctx, "cache-real-gpu-0", metav1.GetOptions{}); err != nil {
		t.Errorf("the kept PVC after two runs: %v", err)
	}
	log, code := e.gpuvet(t, t.TempDir(), "clean", "--kubeconfig", e.kubeconfig, "--cache")
	if code != 0 || !strings.Contains(log, "deleted cache namespace gpuvet-cache") {
		t.Errorf("clean --cache: exit %d:\n%s", code, log)
	}
	if _, err := e.cs.CoreV1().Namespaces().Get(ctx, "gpuvet-cache", metav1.GetOptions{}); err == nil {
		t.Error("the cache namespace is still there after `gpuvet clean --cache`")
	}
}

// cacheRun is what one run with the model cache showed.
type cacheRun struct {
	log, ownerLog, pvPath string
	served                int64
	resolves              int
}

// cacheGPUs is how many of the node's GPUs the model-cache runs serve.
const cacheGPUs = 2

// realCacheRun runs gpuvet with the cache on the real node and checks what every such run must
// show: every endpoint loaded from its engine pod, the populate Job pointed at the mirror, the
// engines reading the cache read-only with the hub offline (taken offline once the populate Job
// succeeded; no request reaches it afterwards), ctrf.json, and nothing of the run left.
func (e *env) realCacheRun(t *testing.T, hub *nodeHub, args []string) cacheRun {
	t.Helper()
	out, state := t.TempDir(), t.TempDir()
	args = append(args, "--out", out)
	w := e.watchCache(t, hub)
	start := time.Now()
	log, code := e.gpuvet(t, state, args...)
	took := time.Since(start)
	w.end()
	t.Logf("gpuvet run with the model cache on the real node: exit %d in %s", code, took.Round(100*time.Millisecond))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, log)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Hosts) != 1 || s.Hosts[0].Error != "" || len(s.Hosts[0].Models) != 1 || len(s.Hosts[0].Models[0].Endpoints) != cacheGPUs {
		t.Fatalf("hosts %+v\n%s", s.Hosts, log)
	}
	for _, ep := range s.Hosts[0].Models[0].Endpoints {
		if ep.Error != "" || ep.Load == nil || !strings.HasPrefix(ep.URL, "http://10.88.") {
			t.Errorf("gpu %v: error %q, url %s", ep.GPUs, ep.Error, ep.URL)
		}
	}
	var ctrf struct{ ReportFormat, SpecVersion string }
	if b, err := os.ReadFile(filepath.Join(out, "ctrf.json")); err != nil || json.Unmarshal(b, &ctrf) != nil || ctrf.ReportFormat != "CTRF" {
		t.Errorf("ctrf.json: %v, %+v", err, ctrf)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.pvHostPath {
		t.Errorf("the cache PVC was not seen bound to a hostPath volume (path %q)", w.pvPath)
	}
	if w.populateHub != hub.url {
		t.Errorf("the populate Job's HF_ENDPOINT is %q, want the mirror %s", w.populateHub, hub.url)
	}
	if len(w.engines) != cacheGPUs {
		t.Errorf("saw %d engine pods, want %d", len(w.engines), cacheGPUs)
	}
	for p, got := range w.engines {
		if got != "HF_HOME=/cache HF_HUB_OFFLINE=1 ro" {
			t.Errorf("engine pod %s: %q, want the cache read-only with the hub offline", p, got)
		}
	}
	hub.mu.Lock()
	r := cacheRun{log: log, ownerLog: w.ownerLog, pvPath: w.pvPath, served: hub.served, resolves: hub.resolves}
	offlineAt := hub.offlineAt
	hub.mu.Unlock()
	if offlineAt != 0 {
		t.Errorf("%d requests reached the hub after the populate Job ended: the engines must read the cache only", offlineAt)
	}
	if !strings.Contains(log, "pulling Qwen/Qwen3-8B from "+hub.url) {
		t.Errorf("the run does not say which hub it pulls from:\n%s", log)
	}
	e.assertNothingLeft(t, state)
	return r
}

// cleanCache removes the kept model cache (`gpuvet clean --cache`), so a test starts from a fresh
// volume and leaves none.
func (e *env) cleanCache(t *testing.T) {
	if log, code := e.gpuvet(t, t.TempDir(), "clean", "--kubeconfig", e.kubeconfig, "--cache"); code != 0 {
		t.Fatalf("clean --cache: exit %d:\n%s", code, log)
	}
}

// TestRealNodeCacheRootOwnedWithoutInit shows why the init container is there: without it, on a
// hostPath volume (root:root 0755, which fsGroup does not change) the populate Job running as 65532
// cannot write, and the run says what to do in Kubernetes terms. The hub comes from HF_ENDPOINT.
func TestRealNodeCacheRootOwnedWithoutInit(t *testing.T) {
	e := setupReal(t)
	e.cleanCache(t) // a fresh, root-owned volume
	defer e.cleanCache(t)
	hub := startNodeHub(t, "Qwen/Qwen3-8B", map[string][]byte{"config.json": []byte(`{}`)})
	out, state := t.TempDir(), t.TempDir()
	log, code := e.gpuvetEnv(t, state, []string{"HF_ENDPOINT=" + hub.url},
		e.realArgs(out, "", "--cache-size", "1Gi", "--cache-owner-init=false", "--set", "health.enabled=false")...)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, log)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"permission denied", "not writable by uid 65532", "kubernetes.cache_owner_init"} {
		if len(s.Hosts) != 1 || !strings.Contains(s.Hosts[0].Error, w) {
			t.Errorf("host error lacks %q:\n%s", w, log)
		}
	}
	if hub.requests == 0 {
		t.Error("the populate Job never reached the hub named by HF_ENDPOINT")
	}
	e.assertNothingLeft(t, state)
}

// realFailsFast runs gpuvet on the real node in a failure mode and checks the node failed with each
// of want, within the bound docs/kubernetes.md states, and that nothing is left.
func (e *env) realFailsFast(t *testing.T, engineCmd string, extra []string, want ...string) {
	out, state := t.TempDir(), t.TempDir()
	kube := e.watchFailure(t)
	start := time.Now()
	log, code := e.gpuvet(t, state, e.realArgs(out, engineCmd, append([]string{"--cache-size", "off", "--set", "health.enabled=false"}, extra...)...)...)
	end := time.Now()
	ft := kube.end()
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, log)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if len(s.Hosts) != 1 || !strings.Contains(s.Hosts[0].Error, w) {
			t.Errorf("host error lacks %q:\n%s", w, log)
		}
	}
	failedAfter := sinceLine(log, "waiting for Ready", "FAILED in")
	t.Logf("8 engine pods on the real node: the node failed %.1fs after they were created (run start to exit, namespace deleted: %s)",
		failedAfter, end.Sub(start).Round(100*time.Millisecond))
	t.Logf("the kubelet reported the first reason %.1fs and the last %.1fs after the first engine pod appeared; gpuvet deleted each pod at most %.1fs after its reason; %s",
		ft.kubelet, ft.lastKubelet, ft.reacted, ft.perPod)
	// gpuvet's own part: it acts on each pod as soon as Kubernetes gives its reason (the last log
	// lines fetched within 10 s), never at a readiness timeout.
	if ft.kubelet < 0 || ft.reacted < 0 || ft.reacted > 30 {
		t.Errorf("gpuvet deleted an engine pod %.1fs after Kubernetes reported its reason (-1: never seen, +Inf: never deleted); it must act within seconds", ft.reacted)
	}
	// docs/kubernetes.md states the bound users can expect; hold it to what a real kubelet does (twice
	// the stated figure: this machine is loaded). In CI the node's pods run at a CPU weight of 64
	// beside the go test, and a container that exits at once has taken 27 s to do so: when the kubelet
	// itself took longer than the stated bound to report every pod's reason (the node fails once each
	// of its engines has ended), the bound is not gpuvet's to keep.
	bound := docsFailBound(t)
	if ft.lastKubelet <= bound && (failedAfter < 0 || failedAfter > 2*bound) {
		t.Errorf("the node failed %.1fs after its engine pods were created; docs/kubernetes.md says within about %.0f seconds", failedAfter, bound)
	}
	// After the kubelet's last word (the last pod's reason, the last pod gone), gpuvet only writes
	// its results, cleans up and deletes its namespace. The namespace's deletion is the control
	// plane's (its namespace controller at nice 15 took 135 s in ci26): gpuvet's part ends when it
	// says it cleaned up.
	kubeletDone := ft.lastReason
	if ft.gone.After(kubeletDone) {
		kubeletDone = ft.gone
	}
	cleaned := end
	if at := lineAt(log, "cleaned up"); at >= 0 {
		cleaned = start.Add(time.Duration(at * float64(time.Second)))
	}
	if kubeletDone.IsZero() || cleaned.Sub(kubeletDone) > 90*time.Second {
		t.Errorf("the run cleaned up %s after the kubelet's last report: a pod that cannot start must fail within seconds, not at a timeout:\n%s",
			cleaned.Sub(kubeletDone).Round(100*time.Millisecond), log)
	}
	e.assertNothingLeft(t, state)
}

// failureWatch times a failing run's parts from the API, pod by pod: when Kubernetes reported why
// each engine pod cannot start (the kubelet's part: each pod's own, a loaded kubelet reports eight
// pods' crash loops a minute apart), when gpuvet marked it for deletion (its part), and when the
// last engine pod was gone (the kubelet's again).
type failureWatch struct {
	mu                 sync.Mutex
	firstSeen, gone    time.Time
	reported, deleting map[string]time.Time
	stop               func()
}

func (e *env) watchFailure(t *testing.T) *failureWatch {
	w := &failureWatch{reported: map[string]time.Time{}, deleting: map[string]time.Time{}}
	w.stop = e.pollPods(t, k8s.LabelRole+"="+k8s.RoleEngine, func(pods []corev1.Pod) { w.see(pods, time.Now()) })
	return w
}

func (w *failureWatch) see(pods []corev1.Pod, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(pods) == 0 && len(w.deleting) > 0 && w.gone.IsZero() {
		w.gone = now
	}
	for _, p := range pods {
		if w.firstSeen.IsZero() {
			w.firstSeen = now
		}
		if _, ok := w.reported[p.Name]; !ok && k8s.PodProblemReason(&p) != "" {
			w.reported[p.Name] = now
		}
		if _, ok := w.deleting[p.Name]; !ok && p.DeletionTimestamp != nil {
			w.deleting[p.Name] = now
		}
	}
}

// failureTimes are a failing run's parts in seconds (-1: not seen).
type failureTimes struct {
	kubelet     float64   // first engine pod seen to the first reason reported
	lastKubelet float64   // first engine pod seen to the last pod's reason
	reacted     float64   // the slowest pod: its reason reported to its deletion by gpuvet
	lastReason  time.Time // when the last engine pod's reason came (zero: none)
	gone        time.Time // when the last engine pod was gone (zero: not seen)
	perPod      string    // each pod's report and deletion, for the log
}

// end stops the watch and returns its times.
func (w *failureWatch) end() failureTimes {
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	ft := failureTimes{kubelet: -1, reacted: -1, gone: w.gone}
	var first time.Time
	var lines []string
	for p, at := range w.reported {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(ft.lastReason) {
			ft.lastReason = at
		}
		del, ok := w.deleting[p]
		if !ok {
			ft.reacted = math.Inf(1) // reported and never deleted by gpuvet
			continue
		}
		ft.reacted = max(ft.reacted, del.Sub(at).Seconds())
		lines = append(lines, fmt.Sprintf("%s: reason at +%.1fs, deleted at +%.1fs", p, at.Sub(w.firstSeen).Seconds(), del.Sub(w.firstSeen).Seconds()))
	}
	if !first.IsZero() && !w.firstSeen.IsZero() {
		ft.kubelet, ft.lastKubelet = first.Sub(w.firstSeen).Seconds(), ft.lastReason.Sub(w.firstSeen).Seconds()
	}
	sort.Strings(lines)
	ft.perPod = strings.Join(lines, "; ")
	return ft
}

func TestRealNodeErrImagePull(t *testing.T) {
	e := setupReal(t)
	// The node's containerd sends every pull to 127.0.0.1:1: nothing leaves the machine. A refused
	// connection is a pull the kubelet retries (a registry down for a moment), given
	// kubernetes.start_grace: 0 here, so the node fails at the kubelet's first word, in its words.
	e.realFailsFast(t, "", []string{"--engine-image", "gpuvet.local/no-such-image:1", "--start-grace", "0s"},
		"ErrImagePull", "no-such-image", "kubernetes.start_grace")
}

func TestRealNodeCrashLoop(t *testing.T) {
	e := setupReal(t)
	e.realFailsFast(t, "gpuvet sim --no-such-flag --gpu H200 --model {model} --host 0.0.0.0 --port {port}", nil,
		"CrashLoopBackOff", "unknown flag: --no-such-flag")
}

// TestRealNodeKillThenClean kills the CLI with SIGKILL while its load Jobs run on the real node, then
// `gpuvet clean` removes the namespace, its pods (real containers) and the manifest.
func TestRealNodeKillThenClean(t *testing.T) {
	e := setupReal(t)
	out, state := t.TempDir(), t.TempDir()
	// Two engines and no health Job: the kill and the clean are under test, and eight engines with
	// health at a CPU weight of 64, beside the go test's parallel runs, once had no load Job pod
	// Running within three minutes.
	c := exec.Command(e.bin, e.realArgs(out, "", "--cache-size", "off", "--set", "load.max_duration=30s", "--gpu-count", "2",
		"--set", "health.enabled=false")...)
	c.Env = append(os.Environ(), "GPUVET_STATE_DIR="+state, "GPUVET_HISTORY_ENABLED=false")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once one of its pods runs real containers: a load Job's when it comes within the
	// wait, else an engine's (in ci26, at a CPU weight of 64 beside the go test, no load Job pod ran
	// within 6 minutes: what is under test is that clean removes the run's live objects).
	ctx := context.Background()
	deadline, engineUp := time.Now().Add(6*time.Minute), time.Time{}
	for {
		pods, _ := e.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelRole + " in (" + k8s.RoleLoad + "," + k8s.RoleEngine + ")"})
		load, engine := 0, 0
		if pods != nil {
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.Labels[k8s.LabelRole] == k8s.RoleLoad {
					load++
				} else if p.Status.Phase == corev1.PodRunning {
					engine++
				}
			}
		}
		if engine > 0 && engineUp.IsZero() {
			engineUp = time.Now()
		}
		if load > 0 || !engineUp.IsZero() && time.Since(engineUp) > 2*time.Minute {
			t.Logf("killed with %d load Job pod(s) and %d engine pod(s) running", load, engine)
			break
		}
		if time.Now().After(deadline) {
			c.Process.Kill()
			t.Fatal("no engine or load Job pod Running within 6 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	ns, _ := e.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelManagedBy + "=" + k8s.ManagedBy})
	if ns == nil || len(ns.Items) != 1 {
		t.Fatalf("after the kill: %v gpuvet namespaces, want the run's one", ns)
	}
	pods, _ := e.cs.CoreV1().Pods(ns.Items[0].Name).List(ctx, metav1.ListOptions{})
	start := time.Now()
	log, code := e.gpuvet(t, state, "clean", "--kubeconfig", e.kubeconfig, "--run", ns.Items[0].Labels[k8s.LabelRun])
	if code != 0 || !strings.Contains(log, "deleted namespace "+ns.Items[0].Name) {
		t.Errorf("clean: exit %d:\n%s", code, log)
	}
	t.Logf("clean removed namespace %s and its %d pods in %s", ns.Items[0].Name, len(pods.Items), time.Since(start).Round(100*time.Millisecond))
	e.assertNothingLeft(t, state)
}

var progressTime = regexp.MustCompile(`^\[\s*([0-9.]+)s\] `)

var docsBound = regexp.MustCompile(`fails the node within about (\d+) seconds`)

// docsFailBound is how soon docs/kubernetes.md says a pod that cannot start fails its node.
func docsFailBound(t *testing.T) float64 {
	b, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	m := docsBound.FindSubmatch(b)
	if m == nil {
		t.Fatalf("docs/kubernetes.md does not say how soon a pod that cannot start fails the node (%q)", docsBound)
	}
	f, _ := strconv.ParseFloat(string(m[1]), 64)
	return f
}

// sinceLine is the time in seconds between the run's progress lines holding from and to (-1 when
// one is absent).
func sinceLine(log, from, to string) float64 {
	a, b := lineAt(log, from), lineAt(log, to)
	if a < 0 || b < 0 {
		return -1
	}
	return b - a
}

// lineAt is the time in seconds since the run's start of its first progress line holding what (-1:
// none).
func lineAt(log, what string) float64 {
	for _, l := range strings.Split(log, "\n") {
		if m := progressTime.FindStringSubmatch(l); m != nil && strings.Contains(l, what) {
			f, _ := strconv.ParseFloat(m[1], 64)
			return f
		}
	}
	return -1
}

// TestRealNodePopulatePodRefused: a cluster whose admission refuses root containers (here a
// ValidatingAdmissionPolicy on gpuvet's namespaces, the run's and the kept cache's, as a Pod Security or site policy would) refuses
// the populate Job's init container. The run fails at once with the API's reason and what to set,
// instead of waiting out kubernetes.job_timeout.
func TestRealNodePopulatePodRefused(t *testing.T) {
	e := setupReal(t)
	ctx := context.Background()
	fail := admissionregistrationv1.Fail
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gpuvet-test-no-root"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.spec.initContainers) || object.spec.initContainers.all(c, !has(c.securityContext) || !has(c.securityContext.runAsUser) || c.securityContext.runAsUser != 0)",
				Message:    "root containers are not allowed here"}}}}
	bind := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "gpuvet-test-no-root"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{k8s.LabelPartOf: k8s.ManagedBy}}}}}
	if _, err := e.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, vap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer e.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, vap.Name, metav1.DeleteOptions{})
	if _, err := e.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, bind, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer e.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, bind.Name, metav1.DeleteOptions{})
	time.Sleep(3 * time.Second) // the apiserver loads a new policy within about a second
	e.cleanCache(t)
	defer e.cleanCache(t)
	hub := startNodeHub(t, "Qwen/Qwen3-8B", map[string][]byte{"config.json": []byte(`{}`)})
	out, state := t.TempDir(), t.TempDir()
	start := time.Now()
	log, code := e.gpuvet(t, state, e.realArgs(out, "", "--cache-size", "1Gi", "--hub-endpoint", hub.url, "--set", "health.enabled=false",
		"--job-timeout", "10m")...)
	took := time.Since(start)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, log)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"its pod cannot be created", "root containers are not allowed here", "kubernetes.cache_owner_init false"} {
		if len(s.Hosts) != 1 || !strings.Contains(s.Hosts[0].Error, w) {
			t.Errorf("host error lacks %q:\n%s", w, log)
		}
	}
	t.Logf("populate pod refused by admission: the run failed in %s", took.Round(100*time.Millisecond))
	if took > 60*time.Second {
		t.Errorf("took %s: a refused pod must fail the run at once, not at the Job's timeout", took)
	}
	e.assertNothingLeft(t, state)
}

// TestRealNodeDynamoThroughService runs the Dynamo path on the real node with real pods (the test
// plays Dynamo's operator: a frontend pod of gpuvet's image serving `gpuvet sim`, worker pods
// holding the GPUs, the frontend Service) and kubernetes.dynamo_target service: the completion
// check and the load Jobs reach the frontend through the Service's ClusterIP, which kube-proxy
// (nftables) forwards to the pod (there is no cluster DNS: gpuvet hands the Jobs the address).
// It needs the node started with KUBE_PROXY=1.
func TestRealNodeDynamoThroughService(t *testing.T) {
	e := setupReal(t)
	ctx := context.Background()
	if out, err := exec.Command("pgrep", "-f", "kube-proxy --kubeconfig").Output(); err != nil || len(out) == 0 {
		t.Skip("no kube-proxy on the real node: start it with `KUBE_PROXY=1 bash scripts/k8s-real-node/setup.sh start` (after `KUBE_PROXY=1 … build`)")
	}
	e.installDynamoCRD(t)
	e.runDynamoOperatorWith(t, realImage, "gpuvet.local/pause:3.10")
	out, state := t.TempDir(), t.TempDir()
	start := time.Now()
	log, code := e.gpuvet(t, state, e.realArgs(out, "", "--dynamo", "--engine", "vllm", "--engine-cmd", "", "--gpu-count", "2",
		"--cache-size", "off", "--set", "health.enabled=false", "--dynamo-target", "service")...)
	t.Logf("gpuvet run --dynamo through the frontend Service on the real node: exit %d in %s", code, time.Since(start).Round(100*time.Millisecond))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, log)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Hosts) != 1 || s.Hosts[0].Error != "" || len(s.Hosts[0].Models) != 1 || len(s.Hosts[0].Models[0].Endpoints) != 1 {
		t.Fatalf("hosts %+v\n%s", s.Hosts, log)
	}
	ep := s.Hosts[0].Models[0].Endpoints[0]
	// ClusterIPs: the test control plane's --service-cluster-ip-range 10.0.0.0/24 (pods are on 10.88.0.0/16).
	if ep.Error != "" || ep.Load == nil || !strings.HasPrefix(ep.URL, "http://10.0.0.") || !strings.HasSuffix(ep.URL, ":8000") || len(ep.GPUs) != 2 {
		t.Errorf("endpoint: error %q, url %s (want the Service's ClusterIP), GPUs %v", ep.Error, ep.URL, ep.GPUs)
	}
	if !strings.Contains(log, "its frontend "+ep.URL+" returned a real completion") {
		t.Errorf("no completion through the Service in the log:\n%s", log)
	}
	left, err := e.dyn.Resource(k8s.DynamoGVR).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil || len(left.Items) != 0 {
		t.Errorf("DynamoGraphDeployments left: %v %v", left, err)
	}
	e.assertNothingLeft(t, state)
}

// TestRealNodeBaseline: --save-baseline then --baseline on backend kubernetes give the overhead
// table (fleet.Execute applies the baseline on the merged summary, as for ssh and opennebula), and
// the plan the load Jobs get is Plan.RemoteYAML: the baseline's local path (which a pod's preflight
// would refuse) and this machine's kubeconfig do not travel into the pods.
func TestRealNodeBaseline(t *testing.T) {
	e := setupReal(t)
	ctx := context.Background()
	first, state := t.TempDir(), t.TempDir()
	// The baseline file's trip through the cluster is under test, not the load: the synchronous rung
	// alone gives the overhead table its rows (TTFT, ITL, TPOT, throughput: 6 a GPU) in a few
	// seconds a run, where the quick sweep took most of the test's 310 s in CI beside the go test.
	short := []string{"--cache-size", "off", "--set", "health.enabled=false", "--gpu-count", "2", "--set", "load.profile=synchronous"}
	log, code := e.gpuvet(t, state, e.realArgs(first, "", append(short, "--save-baseline")...)...)
	if code != 0 {
		t.Fatalf("--save-baseline: exit %d:\n%s", code, log)
	}
	base := filepath.Join(first, "baseline.json")
	if _, err := os.Stat(base); err != nil {
		t.Fatalf("--save-baseline on backend kubernetes wrote no baseline.json: %v", err)
	}
	// Watch the load Jobs' plan while the second run goes.
	var mu sync.Mutex
	plans := map[string]string{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			jobs, err := e.cs.BatchV1().Jobs("").List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelRole + "=" + k8s.RoleLoad})
			if err == nil {
				for _, j := range jobs.Items {
					a := j.Spec.Template.Spec.Containers[0].Args
					for i := 0; i+1 < len(a); i++ {
						if a[i] == "--plan" {
							b, _ := base64.StdEncoding.DecodeString(a[i+1])
							mu.Lock()
							plans[j.Name] = string(b)
							mu.Unlock()
						}
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	second := t.TempDir()
	log, code = e.gpuvet(t, state, e.realArgs(second, "", append(short, "--baseline", base)...)...)
	close(stop)
	<-done
	if code != 0 {
		t.Fatalf("--baseline: exit %d:\n%s", code, log)
	}
	s, err := results.Read(filepath.Join(second, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Baseline == nil || s.Baseline.BaselineFile != base || len(s.Baseline.Rows) == 0 || s.Baseline.Note != "" {
		t.Fatalf("no overhead table on backend kubernetes: %+v", s.Baseline)
	}
	if len(s.Hosts) != 1 || len(s.Hosts[0].Models) != 1 || len(s.Hosts[0].Models[0].Endpoints) != 2 {
		t.Fatalf("hosts %+v", s.Hosts)
	}
	for _, ep := range s.Hosts[0].Models[0].Endpoints {
		if ep.Error != "" || ep.Load == nil {
			t.Errorf("gpu %v: %q", ep.GPUs, ep.Error)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(plans) != 2 {
		t.Fatalf("saw %d load Jobs' plans, want 2", len(plans))
	}
	for j, p := range plans {
		for _, local := range []string{base, e.kubeconfig, "save_baseline: true"} {
			if strings.Contains(p, local) {
				t.Errorf("load Job %s's plan carries %q:\n%s", j, local, p)
			}
		}
	}
	e.assertNothingLeft(t, state)
}
