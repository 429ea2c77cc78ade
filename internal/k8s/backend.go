package k8s

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Options are the Kubernetes backend's inputs that are not in the plan.
type Options struct {
	RunID       string
	Image       string // gpuvet's own image (--image)
	EngineImage string // engine image; "" the kind's default (vllm/vllm-openai:<engine.version>)
	Selection   Selection
	// ParallelNodes bounds how many nodes run at once (--parallel-nodes).
	ParallelNodes int
	// KeepOnFailure keeps the namespace when the run failed (--keep-on-failure), for a post-mortem.
	KeepOnFailure bool
	// CacheSize is the model-cache PVC size ("off": no cache PVC); CacheAccess its access mode
	// (model_cache.access_mode: auto, ReadWriteOnce, ReadWriteMany).
	CacheSize    string
	CacheAccess  string
	StorageClass string // "" the cluster's default StorageClass
	// CacheNamespace keeps the cache PVCs beyond the run (kubernetes.cache_namespace); "": the run's
	// own namespace (the cache goes with it).
	CacheNamespace string
	// HubEndpoint is the hub the populate Jobs download from (model_cache.endpoint); "": $HF_ENDPOINT
	// where gpuvet runs, else the public hub.
	HubEndpoint string
	// CacheOwnerInit: the populate Job's root init container that chowns the volume's root
	// (kubernetes.cache_owner_init).
	CacheOwnerInit bool
	// Dynamo serves each model through a DynamoGraphDeployment instead of engine Pods.
	Dynamo bool
	// DynamoService sends the Dynamo load to the frontend Service's ClusterIP (kube-proxy) instead
	// of a Ready pod behind it (kubernetes.dynamo_target service).
	DynamoService bool
	// HealthArgs are extra arguments for `gpuvet health` in each node's health Job.
	HealthArgs []string
	// JobTimeout bounds each gpuvet Job (cache populate, health, load).
	JobTimeout time.Duration
	Progress   func(format string, args ...any)
}

// AnnotationDefaultClass marks the default StorageClass.
const AnnotationDefaultClass = "storageclass.kubernetes.io/is-default-class"

// Run is one Kubernetes run, checked and ready to create objects.
type Run struct {
	cl        *Cluster
	cfg       config.Config
	opt       Options
	ns        string
	cacheNS   string // where the cache PVCs live and the pods mounting them run (ns without a kept cache)
	planArg   string // the resolved plan, base64 YAML, passed to every load Job
	nodes     []Node
	skipped   []results.SkippedHost
	class     string
	size      resource.Quantity
	access    corev1.PersistentVolumeAccessMode
	cacheNote string
	shared    sharedCache
	tokenEnv  string
	hub       string // HF_ENDPOINT of the populate Jobs ("": the public hub)
	man       *fleet.Manifest
	started   sync.Once // begin
	startErr  error
	nsCreated bool
}

// Prepare does everything that creates nothing: it checks access, chooses the nodes and finds the
// StorageClass. Its errors are the user's to fix (exit 2).
func Prepare(ctx context.Context, cl *Cluster, cfg config.Config, planYAML []byte, opt Options) (*Run, error) {
	if opt.Image == "" {
		return nil, errors.New("kubernetes.image (--image): gpuvet's own image is required for the in-cluster Jobs (build it with `ko build ./cmd/gpuvet`, see docs/kubernetes.md)")
	}
	r := &Run{cl: cl, cfg: cfg, opt: opt, ns: Namespace(opt.RunID), planArg: base64.StdEncoding.EncodeToString(planYAML)}
	cache := !config.IsOff(opt.CacheSize)
	r.cacheNS = r.ns
	if cache && opt.CacheNamespace != "" {
		r.cacheNS = opt.CacheNamespace
	}
	if cache {
		q, err := resource.ParseQuantity(opt.CacheSize)
		if err != nil || q.Sign() <= 0 {
			return nil, fmt.Errorf("model_cache.size (--cache-size) %q: want a size such as 100Gi, or off", opt.CacheSize)
		}
		r.size = q
	}
	r.hub = opt.HubEndpoint
	if r.hub == "" {
		r.hub = os.Getenv("HF_ENDPOINT")
	}
	r.hub = strings.TrimRight(r.hub, "/")
	if p := config.HubURLProblem(r.hub); r.hub != "" && opt.HubEndpoint == "" && p != "" {
		return nil, fmt.Errorf("HF_ENDPOINT (the hub mirror the populate Jobs would use; model_cache.endpoint overrides it): %s", p)
	}
	if cfg.Engine.TokenEnv != "" && os.Getenv(cfg.Engine.TokenEnv) != "" {
		r.tokenEnv = cfg.Engine.TokenEnv
	}
	if opt.Dynamo {
		if err := cl.CheckDynamo(cfg.Engine.Kind); err != nil {
			return nil, err
		}
	}
	if err := CheckAccess(ctx, cl.Client, r.ns, r.cacheNS, Needs(cache, r.tokenEnv != "", opt.Dynamo, r.keptCache())); err != nil {
		return nil, err
	}
	nodes, skipped, err := ChooseNodes(ctx, cl.Client, opt.Selection)
	if err != nil {
		return nil, err
	}
	r.nodes, r.skipped = nodes, skipped
	tp := max(1, cfg.Engine.TP)
	for _, n := range nodes {
		if n.Free < tp {
			return nil, fmt.Errorf("node %s has %d free GPU(s), fewer than engine.tp=%d", n.Name, n.Free, tp)
		}
	}
	if cache {
		sc, err := r.storageClass(ctx)
		if err != nil {
			return nil, err
		}
		r.class = sc.Name
		var why string
		r.access, why = chooseAccess(opt.CacheAccess, sc, len(nodes))
		r.cacheNote = fmt.Sprintf("model cache %s: %s", r.size.String(), why)
	} else {
		r.cacheNote = "model cache: none (model_cache.size off): every engine downloads its weights"
	}
	return r, nil
}

// Nodes are the chosen nodes; Skipped the others with their reasons.
func (r *Run) Nodes() []Node                  { return r.nodes }
func (r *Run) Skipped() []results.SkippedHost { return r.skipped }
func (r *Run) NamespaceName() string          { return r.ns }

// keptCache tells whether the cache outlives the run, in a namespace of its own.
func (r *Run) keptCache() bool { return r.cacheNS != r.ns }

// podName names an object of the pod namespace: in a kept cache's namespace, which several runs
// share, it carries the run id's random part, so no two runs' names meet.
func (r *Run) podName(parts ...string) string {
	if r.keptCache() {
		_, tag, _ := strings.Cut(r.opt.RunID, "-")
		parts = append(parts, tag)
	}
	return dnsName(parts...)
}

// podNS is the namespace of the pods that mount the cache (populate Jobs, engines, Dynamo
// deployments): a pod can mount only a PVC of its own namespace.
func (r *Run) podNS() string { return r.cacheNS }
func (r *Run) progress(format string, a ...any) {
	if r.opt.Progress != nil {
		r.opt.Progress(format, a...)
	}
}

// begin creates what the run's nodes share, once, before the first node's provision: the run's
// namespace, the kept cache's, and the hub-token Secret. An error fails every node's provision.
func (r *Run) begin(ctx context.Context) error {
	r.started.Do(func() { r.startErr = r.create(ctx) })
	return r.startErr
}

func (r *Run) create(ctx context.Context) error {
	nsObj := fleet.Object{Kind: "Namespace", Name: r.ns}
	if err := r.man.Record(nsObj); err != nil {
		return err
	}
	if _, err := r.cl.Client.CoreV1().Namespaces().Create(ctx, namespaceObject(r.opt.RunID), metav1.CreateOptions{}); err != nil {
		r.man.Deleted(nsObj)
		return fmt.Errorf("creating namespace %s: %v", r.ns, err)
	}
	r.nsCreated = true
	r.progress("namespace %s created (run %s)", r.ns, r.opt.RunID)
	if r.keptCache() {
		if err := r.ensureCacheNamespace(ctx); err != nil {
			return err
		}
	}
	if r.tokenEnv != "" {
		return r.createTokenSecret(ctx)
	}
	return nil
}

// Close deletes the namespace once every node is done, whatever happened (unless KeepOnFailure and
// something failed), and waits until it is gone: fleet.Execute calls it (fleet.Closer).
func (r *Run) Close(ctx context.Context, outs []fleet.Outcome) error {
	if !r.nsCreated {
		return nil
	}
	failed := ctx.Err() != nil
	for _, o := range outs {
		failed = failed || o.Err != nil
	}
	return r.teardown(ctx, failed)
}

// teardown deletes the namespace and waits until it is gone (or keeps it on failure when asked).
func (r *Run) teardown(ctx context.Context, failed bool) error {
	if failed && r.opt.KeepOnFailure {
		r.progress("keeping namespace %s for a post-mortem (--keep-on-failure); remove it with `gpuvet clean --run %s`", r.ns, r.opt.RunID)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if r.keptCache() {
		if err := DeleteRunObjects(ctx, r.cl.Client, r.cl.Dynamic, r.cacheNS, r.opt.RunID); err != nil {
			return fmt.Errorf("deleting run %s's pods in the cache namespace %s: %v: run `gpuvet clean --run %s`", r.opt.RunID, r.cacheNS, err, r.opt.RunID)
		}
	}
	if err := DeleteNamespace(ctx, r.cl.Client, r.ns); err != nil {
		return fmt.Errorf("deleting namespace %s: %v: run `gpuvet clean --run %s`", r.ns, err, r.opt.RunID)
	}
	// Everything else lived in the namespace, or was the run's in the cache's: marked at once.
	r.man.DeletedAll(append(r.man.Live(), fleet.Object{Kind: "Namespace", Name: r.ns}))
	r.progress("namespace %s deleted", r.ns)
	return nil
}

// DeleteNamespace deletes a namespace (foreground) and waits until the API no longer has it.
func DeleteNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	fg := metav1.DeletePropagationForeground
	err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	for {
		_, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still terminating after the wait (%v)", ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// tokenSecret is the run's hub-token Secret ("": the run passes no token).
func (r *Run) tokenSecret() string {
	if r.tokenEnv == "" {
		return ""
	}
	return tokenSecret(r.opt.RunID)
}

// createTokenSecret makes the hub-token Secret where the populate Jobs run (the cache namespace
// when the cache is kept: one Secret per run there, removed with the run).
func (r *Run) createTokenSecret(ctx context.Context) error {
	name := r.tokenSecret()
	o := fleet.Object{Kind: "Secret", Namespace: r.podNS(), Name: name}
	if err := r.man.Record(o); err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: runLabels(r.opt.RunID, RoleCache, "")},
		Type: corev1.SecretTypeOpaque, StringData: map[string]string{"HF_TOKEN": os.Getenv(r.tokenEnv)}}
	if _, err := r.cl.Client.CoreV1().Secrets(r.podNS()).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the hub-token Secret (from $%s): %v", r.tokenEnv, err)
	}
	return nil
}

// nodeHost is one GPU node as a fleet host.
type nodeHost struct {
	r      *Run
	node   Node
	index  int
	pvc    string
	health *results.Health
}

func (h *nodeHost) Name() string { return h.node.Name }

func (h *nodeHost) say(format string, a ...any) {
	h.r.progress("%s: %s", h.node.Name, fmt.Sprintf(format, a...))
}

// create records obj in the manifest, then creates it.
func (h *nodeHost) record(kind, ns, name string) error {
	return h.r.man.Record(fleet.Object{Kind: kind, Namespace: ns, Name: name, Host: h.node.Name})
}

// Provision creates the node's model cache (PVC + one populate Job per model) and runs the
// health Job on all its free GPUs.
func (h *nodeHost) Provision(ctx context.Context) error {
	r := h.r
	if err := r.begin(ctx); err != nil {
		return err
	}
	if r.class != "" {
		if err := h.provisionCache(ctx); err != nil {
			return err
		}
	}
	if r.cfg.Health.Enabled {
		h.health = h.runHealth(ctx)
	}
	return nil
}

// runHealth runs `gpuvet health` in a pod holding all the node's free GPUs. A failure is the
// health phase's result, not the host's end.
func (h *nodeHost) runHealth(ctx context.Context) *results.Health {
	r := h.r
	// Relative paths: in-pod runs the subcommand in a fresh working directory.
	const out = "health.json"
	args := append([]string{"in-pod", "--emit", out, "--", "health", "--out", out, "--expect-gpus", strconv.Itoa(h.node.Free)}, r.opt.HealthArgs...)
	j := gpuvetJob(r.opt.RunID, dnsName("health", strconv.Itoa(h.index)), RoleHealth, h.node.Name, r.opt.Image, args, h.node.Free, r.opt.Selection.Tolerations)
	h.say("health: %d GPUs", h.node.Free)
	b, err := h.runJob(ctx, r.ns, j)
	if err != nil && b == nil {
		return &results.Health{Source: "kubernetes", Status: results.StatusFailed, Error: err.Error()}
	}
	var hr results.Health
	if uerr := json.Unmarshal(b, &hr); uerr != nil {
		return &results.Health{Source: "kubernetes", Status: results.StatusFailed, Error: "health result: " + uerr.Error()}
	}
	return &hr
}

// runJob records and creates a gpuvet Job in namespace ns, waits for it, and returns the result it
// emitted (nil when it emitted none; the error then says why); a populate Job's whole log.
func (h *nodeHost) runJob(ctx context.Context, ns string, j jobObject) ([]byte, error) {
	r := h.r
	if err := h.record("Job", ns, j.Name); err != nil {
		return nil, err
	}
	if _, err := r.cl.Client.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating job %s: %v", j.Name, err)
	}
	timeout := r.opt.JobTimeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	log, err := WaitJob(ctx, r.cl.Client, ns, j.Name, timeout)
	if j.Labels[LabelRole] == RoleCache { // `gpuvet cache pull` emits no result: its log says what it did
		return log, err
	}
	res, xerr := ExtractResult(log)
	if xerr != nil {
		res = nil
		if err == nil {
			err = fmt.Errorf("job %s: %v", j.Name, xerr)
		}
	}
	return res, err
}

// Run serves each model on the node (one engine pod per GPU or tp GPUs), waits until every
// replica is Ready, runs one load Job per engine (run.parallel_gpus at a time) and assembles the
// node's summary from theirs.
func (h *nodeHost) Run(ctx context.Context) (*results.Summary, error) {
	r := h.r
	gpus := make([]results.GPUInfo, h.node.Free)
	// GPU feature discovery writes the nvidia-smi name with dashes for spaces ("NVIDIA-H200"); the
	// reference table and the accelerator overrides key on the nvidia-smi name.
	name := strings.ReplaceAll(h.node.Product, "-", " ")
	if name == "" {
		name = string(GPUResource)
	}
	for i := range gpus {
		gpus[i] = results.GPUInfo{Index: i, Name: name, UUID: fmt.Sprintf("%s/gpu-%d", h.node.Name, i), NUMANode: -1}
	}
	host := results.Host{Name: h.node.Name, Health: h.health,
		Discovery: results.Discovery{Source: "kubernetes", GPUs: gpus,
			Note: fmt.Sprintf("%d of %d allocatable nvidia.com/gpu free; product label %q; %s", h.node.Free, h.node.Allocatable, h.node.Product, r.cacheNote)}}
	sum := &results.Summary{SchemaVersion: results.SchemaVersion, Hosts: []results.Host{host}}
	for mi, model := range r.cfg.Models {
		m, meta, err := h.serveModel(ctx, mi, model, gpus)
		sum.Hosts[0].Models = append(sum.Hosts[0].Models, m)
		if meta != nil {
			sum.Meta = *meta
		}
		if err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// serveModel runs one model's engines and load on the node.
func (h *nodeHost) serveModel(ctx context.Context, mi int, model string, gpus []results.GPUInfo) (results.Model, *results.Meta, error) {
	r := h.r
	if r.opt.Dynamo {
		return h.serveDynamo(ctx, mi, model, gpus)
	}
	cs, ns := r.cl.Client, r.podNS()
	tp := max(1, r.cfg.Engine.TP)
	nslots := h.node.Free / tp
	if c := r.cfg.Run.GPUCount; c > 0 {
		nslots = min(nslots, c/tp)
	}
	m := results.Model{Model: model, Engine: results.EngineInfo{Kind: r.cfg.Engine.Kind, TP: tp}}
	img := r.opt.EngineImage
	if w := strings.Fields(r.cfg.Engine.Command); img == "" && len(w) > 0 && w[0] == "gpuvet" {
		img = r.opt.Image // `gpuvet sim` as the engine runs from gpuvet's own image
	}
	if img == "" {
		var err error
		if img, err = DefaultEngineImage(r.cfg.Engine.Kind, r.cfg.Engine.Version); err != nil {
			m.Error = err.Error()
			return m, nil, err
		}
	}
	es := EngineSpec{Kind: r.cfg.Engine.Kind, Command: r.cfg.Engine.Command, Image: img, ExtraArgs: r.cfg.Engine.ExtraArgs,
		Model: model, TP: tp, MaxModelLen: r.cfg.Engine.MaxModelLen, GPUMemoryUtilization: r.cfg.Engine.GPUMemoryUtilization,
		Env: r.cfg.Engine.Env, CachePVC: h.pvc}
	var pods []string
	start := time.Now()
	for s := range nslots {
		name := r.podName("engine", strconv.Itoa(h.index), strconv.Itoa(mi), strconv.Itoa(s))
		pod, err := enginePod(r.opt.RunID, name, h.node.Name, s, es, r.opt.Selection.Tolerations)
		if err != nil {
			m.Error = err.Error()
			return m, nil, err
		}
		m.Engine.Command = strings.Join(pod.Spec.Containers[0].Command, " ")
		if err := h.record("Pod", ns, name); err != nil {
			return m, nil, err
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			m.Error = fmt.Sprintf("creating engine pod %s: %v", name, err)
			return m, nil, errors.New(m.Error)
		}
		pods = append(pods, name)
	}
	defer h.deletePods(context.WithoutCancel(ctx), pods)
	h.say("%s: %d engine pod(s) (%s), waiting for Ready", model, len(pods), img)
	if err := WaitPodsReady(ctx, cs, ns, pods, r.cfg.Engine.ReadyTimeout.D()); err != nil {
		m.Error = "engines not ready: " + err.Error()
		return m, nil, errors.New(m.Error)
	}
	// Ready also means a real completion came back from each replica (ready.go says from where).
	urls, err := h.podURLs(ctx, pods)
	if err != nil {
		m.Error = "engines not ready: " + err.Error()
		return m, nil, errors.New(m.Error)
	}
	fails, err := h.checkCompletions(ctx, dnsName("ready", strconv.Itoa(h.index), strconv.Itoa(mi)), model, urls)
	if err != nil {
		m.Error = "engines Ready, but the completion check did not run: " + err.Error()
		return m, nil, errors.New(m.Error)
	}
	ready := time.Since(start)
	eps := make([]results.Endpoint, len(pods))
	var good []string
	for s, f := range fails {
		if f == "" {
			good = append(good, pods[s])
			continue
		}
		eps[s] = results.Endpoint{GPUName: gpus[0].Name, GPUs: slotGPUs(s, tp), URL: urls[s], Error: "engine pod " + pods[s] + ": " + f}
		h.say("%s: engine pod %s %s", model, pods[s], f)
	}
	if len(good) == 0 {
		m.Endpoints = eps
		m.Error = fmt.Sprintf("no engine pod returned a real completion; pod %s: %s", pods[0], fails[0])
		return m, nil, errors.New(m.Error)
	}
	h.say("%s: %d engine pod(s) Ready and %d returned a real completion, in %.1fs; load", model, len(pods), len(good), ready.Seconds())
	metas := make([]*results.Meta, len(pods))
	sem := make(chan struct{}, max(1, int(r.cfg.Run.ParallelGPUs)))
	var wg sync.WaitGroup
	for s, pod := range pods {
		if fails[s] != "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			eps[s], metas[s] = h.runLoad(ctx, dnsName("load", strconv.Itoa(h.index), strconv.Itoa(mi), strconv.Itoa(s)), urls[s], model,
				"engine pod "+pod, slotGPUs(s, tp), gpus[0].Name, ready)
		}()
	}
	wg.Wait()
	m.Endpoints = eps
	var meta *results.Meta
	for _, mt := range metas {
		if mt != nil {
			meta = mt
			break
		}
	}
	return m, meta, nil
}

// runLoad runs one load Job on the node against url (an engine pod, or a Dynamo frontend) and
// returns its endpoint result for gpus. what names the server in the binding and errors; extra
// are more `gpuvet run` arguments.
func (h *nodeHost) runLoad(ctx context.Context, job, url, model, what string, gpus []int, gpuName string, ready time.Duration, extra ...string) (results.Endpoint, *results.Meta) {
	r := h.r
	ep := results.Endpoint{GPUName: gpuName, GPUs: gpus, URL: url}
	const out = "out" // relative: in-pod's fresh working directory
	args := []string{"in-pod", "--plan", r.planArg, "--emit", out + "/summary.json", "--",
		"run", "--backend", "endpoint", "--url", url, "--model", model, "--out", out, "--set", "health.enabled=false"}
	j := gpuvetJob(r.opt.RunID, job, RoleLoad, h.node.Name, r.opt.Image, append(args, extra...), 0, r.opt.Selection.Tolerations)
	b, err := h.runJob(ctx, r.ns, j)
	if b == nil {
		ep.Error = fmt.Sprintf("load job against %s: %v", what, err)
		return ep, nil
	}
	s, perr := results.Parse(b)
	if perr != nil || len(s.Hosts) == 0 || len(s.Hosts[0].Models) == 0 || len(s.Hosts[0].Models[0].Endpoints) == 0 {
		ep.Error = fmt.Sprintf("load job against %s: no endpoint result (%v)", what, perr)
		return ep, nil
	}
	got := s.Hosts[0].Models[0].Endpoints[0]
	got.GPUs, got.GPUName, got.URL = ep.GPUs, ep.GPUName, ep.URL
	got.Binding = "kubernetes: " + what + ", load job " + j.Name + " on node " + h.node.Name
	got.ProvisionSeconds = ready.Seconds() + got.ProvisionSeconds
	got.RawLoadFile, got.LogFile = "", ""
	if err != nil && got.Error == "" {
		got.Error = err.Error()
	}
	return got, &s.Meta
}

// slotGPUs are the GPU indexes of engine slot s of tp GPUs each.
func slotGPUs(s, tp int) []int {
	var g []int
	for i := s * tp; i < (s+1)*tp; i++ {
		g = append(g, i)
	}
	return g
}

// deletePods deletes engine pods and waits until they are gone, so their GPUs are free again.
func (h *nodeHost) deletePods(ctx context.Context, pods []string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cs, ns := h.r.cl.Client, h.r.podNS()
	var deleted []string
	for _, p := range pods {
		if err := cs.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
			deleted = append(deleted, p)
		}
	}
	_ = WaitPodsGone(ctx, cs, ns, deleted) // watched, not polled (wait.go)
	for _, p := range deleted {
		h.r.man.Deleted(fleet.Object{Kind: "Pod", Namespace: ns, Name: p, Host: h.node.Name})
	}
}

// Cleanup deletes what is left of the node's pods and Jobs (the namespace goes at the end).
func (h *nodeHost) Cleanup(ctx context.Context) error {
	if h.r.opt.KeepOnFailure {
		return nil
	}
	cs := h.r.cl.Client
	sel := LabelNode + "=" + labelValue(h.node.Name) + "," + LabelRun + "=" + h.r.opt.RunID
	bg := metav1.DeletePropagationBackground
	var errs []error
	for _, ns := range uniq(h.r.ns, h.r.podNS()) {
		errs = append(errs, ignoreNotFound(cs.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{LabelSelector: sel})),
			ignoreNotFound(cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel})))
	}
	return errors.Join(errs...)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// uniq is its arguments without repeats, in order.
func uniq(s ...string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
