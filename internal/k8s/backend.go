package k8s

import (
	"bytes"
	"cmp"
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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/inpod"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Options are the Kubernetes backend's inputs that are not in the plan.
type Options struct {
	RunID       string
	Image       string // gpuvet's own image (--image)
	EngineImage string // engine image; "" the kind's default (vllm/vllm-openai:<engine.version>)
	Selection   Selection
	// PriorityClass of every pod the run creates (kubernetes.priority_class; "": the cluster's
	// default): a low one lets the cluster's real work preempt a vetting run.
	PriorityClass string
	ParallelNodes int    // how many nodes run at once (--parallel-nodes)
	KeepOnFailure bool   // keep the namespace of a failed run, for a post-mortem (--keep-on-failure)
	CacheSize     string // model-cache PVC size ("off": none)
	CacheAccess   string // model_cache.access_mode: auto, ReadWriteOnce, ReadWriteMany
	StorageClass  string // "" the cluster's default StorageClass
	// CacheNamespace keeps the cache PVCs beyond the run (kubernetes.cache_namespace; "": the run's
	// namespace, the cache goes with it); CacheNamespaceAllowExisting lets the cache into one gpuvet
	// did not create (kubernetes.cache_namespace_allow_existing).
	CacheNamespace              string
	CacheNamespaceAllowExisting bool
	// HubEndpoint is the hub the populate Jobs download from (model_cache.endpoint; "": $HF_ENDPOINT
	// where gpuvet runs, else the public hub).
	HubEndpoint    string
	CacheOwnerInit bool // a root init container chowns the cache volume (kubernetes.cache_owner_init)
	Dynamo         bool // serve each model through a DynamoGraphDeployment instead of engine Pods
	// DynamoService sends the Dynamo load to the frontend Service's ClusterIP instead of a Ready pod
	// behind it (kubernetes.dynamo_target service).
	DynamoService bool
	HealthArgs    []string      // extra arguments for `gpuvet health` in each node's health Job
	JobTimeout    time.Duration // bounds each gpuvet Job (cache populate, health, load)
	// StartGrace is how long a pod may keep failing to start with an error Kubernetes retries (an
	// image pull, a volume mount, its network sandbox) before its node fails
	// (kubernetes.start_grace); a pull whose image is missing fails at once.
	StartGrace time.Duration
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
	cacheNS   string       // where the cache PVCs live and the pods mounting them run (ns without a kept cache)
	plan      *config.Plan // what every node's host pipeline runs (Fleet.Plan)
	out       string       // the run's output folder: each node's own results go under out/hosts/NODE
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

	plansMu sync.Mutex
	plans   map[string]string // nodePlan's, by their settings

	extraMu     sync.Mutex
	extraModels []string // models only an accelerators entry serves, numbered after the plan's (modelIndex)
}

// Prepare checks access, chooses the nodes and finds the StorageClass, creating nothing. Its errors
// are the user's to fix (exit 2).
func Prepare(ctx context.Context, cl *Cluster, cfg config.Config, opt Options) (*Run, error) {
	if opt.Image == "" {
		return nil, errors.New("kubernetes.image (--image): gpuvet's own image is required for the in-cluster Jobs (build it with `ko build ./cmd/gpuvet`, see docs/kubernetes.md)")
	}
	r := &Run{cl: cl, cfg: cfg, opt: opt, ns: Namespace(opt.RunID)}
	cache := !config.IsOff(opt.CacheSize)
	r.cacheNS = r.ns
	if cache {
		r.cacheNS = cmp.Or(opt.CacheNamespace, r.ns)
		q, err := resource.ParseQuantity(opt.CacheSize)
		if err != nil || q.Sign() <= 0 {
			return nil, fmt.Errorf("model_cache.size (--cache-size) %q: want a size such as 100Gi, or off", opt.CacheSize)
		}
		r.size = q
	}
	r.hub = strings.TrimRight(cmp.Or(opt.HubEndpoint, os.Getenv("HF_ENDPOINT")), "/")
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

// keptCache tells whether the cache outlives the run, in a namespace of its own.
func (r *Run) keptCache() bool { return r.cacheNS != r.ns }

// podName names an object of the pod namespace: in a kept cache's, which runs share, it carries the
// run id's random part.
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

// begin creates, once, what the run's nodes share: the run's namespace, the kept cache's, and the
// hub-token Secret. An error fails every node's provision.
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
		return fmt.Errorf("creating namespace %s: %w", r.ns, err)
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

// Close deletes the namespace once every node is done (unless KeepOnFailure and something failed)
// and waits until it is gone (fleet.Closer).
func (r *Run) Close(ctx context.Context, outs []fleet.Outcome) error {
	if !r.nsCreated {
		return nil
	}
	failed := ctx.Err() != nil || slices.ContainsFunc(outs, func(o fleet.Outcome) bool { return o.Err != nil })
	if failed && r.opt.KeepOnFailure {
		r.progress("keeping namespace %s for a post-mortem (--keep-on-failure); remove it with `gpuvet clean --run %s`", r.ns, r.opt.RunID)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if r.keptCache() {
		if err := DeleteRunObjects(ctx, r.cl.Client, r.cl.Dynamic, r.cacheNS, r.opt.RunID); err != nil {
			return fmt.Errorf("deleting run %s's pods in the cache namespace %s: %w: run `gpuvet clean --run %s`", r.opt.RunID, r.cacheNS, err, r.opt.RunID)
		}
	}
	if err := DeleteNamespace(ctx, r.cl.Client, r.ns); err != nil {
		return fmt.Errorf("deleting namespace %s: %w: run `gpuvet clean --run %s`", r.ns, err, r.opt.RunID)
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
	if over, _ := pollUntil(ctx, func() (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); over {
		return fmt.Errorf("still terminating after the wait (%w)", ctx.Err())
	}
	return nil
}

// tokenSecret is the run's hub-token Secret ("": the run passes no token).
func (r *Run) tokenSecret() string {
	if r.tokenEnv == "" {
		return ""
	}
	return tokenSecret(r.opt.RunID)
}

// createTokenSecret makes the hub-token Secret where the populate Jobs run (podNS).
func (r *Run) createTokenSecret(ctx context.Context) error {
	name := r.tokenSecret()
	o := fleet.Object{Kind: "Secret", Namespace: r.podNS(), Name: name}
	if err := r.man.Record(o); err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: runLabels(r.opt.RunID, RoleCache, "")},
		Type: corev1.SecretTypeOpaque, StringData: map[string]string{"HF_TOKEN": os.Getenv(r.tokenEnv)}}
	if _, err := r.cl.Client.CoreV1().Secrets(r.podNS()).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the hub-token Secret (from $%s): %w", r.tokenEnv, err)
	}
	return nil
}

// nodeHost is one GPU node as a fleet host: Provision makes its model cache, Run runs the host
// pipeline (node.go), Cleanup removes its pods and Jobs.
type nodeHost struct {
	r     *Run
	node  Node
	index int
	pvc   string
}

func (h *nodeHost) Name() string { return h.node.Name }

func (h *nodeHost) say(format string, a ...any) {
	h.r.progress("%s: %s", h.node.Name, fmt.Sprintf(format, a...))
}

// record records an object of the node in the manifest (before it is created).
func (h *nodeHost) record(kind, ns, name string) error {
	return h.r.man.Record(fleet.Object{Kind: kind, Namespace: ns, Name: name, Host: h.node.Name})
}

// Provision creates the node's model cache (PVC + one populate Job per model).
func (h *nodeHost) Provision(ctx context.Context) error {
	if err := h.r.begin(ctx); err != nil || h.r.class == "" {
		return err
	}
	return h.provisionCache(ctx)
}

// runHealth is the node's health phase: the health Job with the node's settings cfg. A failure is
// the health phase's result, not the host's end.
func (h *nodeHost) runHealth(ctx context.Context, cfg config.Config) *results.Health {
	// A Job that gave no result is the infrastructure's: the GPUs are not proven, so the judge
	// leaves them inconclusive (ErrorLayer).
	infra := func(msg string) *results.Health {
		return &results.Health{Source: "kubernetes", Status: results.StatusFailed, Error: msg, ErrorLayer: results.LayerInfra}
	}
	j, err := h.healthJob(cfg)
	if err != nil {
		return infra(err.Error())
	}
	b, err := h.runJob(ctx, h.r.ns, j)
	if err != nil && b == nil {
		if d := results.DisruptionOf(err); d != "" { // preempted, evicted: not the GPUs' verdict
			return &results.Health{Source: "kubernetes", Status: results.StatusInconclusive, Error: err.Error(), Disruption: d}
		}
		return infra(err.Error())
	}
	var hr results.Health
	if uerr := json.Unmarshal(b, &hr); uerr != nil {
		return infra("health result: " + uerr.Error())
	}
	results.Compact(&hr) // held until the run's end, for every node
	return &hr
}

// healthJob is the node's health Job: `gpuvet health` in a pod holding the node's free GPUs, with
// the node's plan (nodePlan), the expected GPU count, then kubernetes.health_args, which win (a
// flag beats the plan).
func (h *nodeHost) healthJob(cfg config.Config) (*batchv1.Job, error) {
	r := h.r
	plan, err := r.nodePlan(settingsOf(cfg))
	if err != nil {
		return nil, fmt.Errorf("the health Job's plan: %w", err)
	}
	// Relative paths: in-pod runs the subcommand in a fresh working directory.
	const out = "health.json"
	args := inpod.Command(plan, out, "health", "--out", out, "--expect-gpus", strconv.Itoa(h.node.Free))
	args = append(args, r.opt.HealthArgs...)
	return gpuvetJob(r.opt.RunID, dnsName("health", strconv.Itoa(h.index)), RoleHealth, h.node.Name, r.opt.Image, args, h.node.Free, r.opt.Selection.Tolerations), nil
}

// nodeSettings are what a node's Job plan takes from the pipeline's cfg (its GPU's accelerators
// entry, the node's run.parallel_gpus, a Dynamo frontend's concurrency); the rest is the run's plan.
type nodeSettings struct {
	Load         config.LoadProfile
	Health       config.Health
	ParallelGPUs config.GPUsAtOnce
	History      bool
	SameHost     bool // a load Job's: its engine is a pod of the Job's node (endpoint.same_host)
}

func settingsOf(cfg config.Config) nodeSettings {
	return nodeSettings{Load: cfg.Load, Health: cfg.Health, ParallelGPUs: cfg.Run.ParallelGPUs, History: cfg.History.Enabled}
}

// nodePlan is the plan a node's Job runs with, as base64 YAML: the run's plan with s in place. The
// pod resolves nothing again. Nodes alike share one (a plan is about 6 ms to build and check; a
// run has one Job per engine).
func (r *Run) nodePlan(s nodeSettings) (string, error) {
	key, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	r.plansMu.Lock()
	defer r.plansMu.Unlock()
	if p, ok := r.plans[string(key)]; ok {
		return p, nil
	}
	c := r.plan.Config
	c.Load, c.Health, c.Run.ParallelGPUs, c.History.Enabled, c.Endpoint.SameHost = s.Load, s.Health, s.ParallelGPUs, s.History, s.SameHost
	b, err := r.plan.ResolvedYAML(c)
	if err != nil {
		return "", err
	}
	if r.plans == nil {
		r.plans = map[string]string{}
	}
	r.plans[string(key)] = base64.StdEncoding.EncodeToString(b)
	return r.plans[string(key)], nil
}

// runJob records and creates a gpuvet Job in ns, waits for it, and returns the result it emitted
// (nil when none; the error then says why), or a populate Job's whole log.
func (h *nodeHost) runJob(ctx context.Context, ns string, j *batchv1.Job) ([]byte, error) {
	r := h.r
	if err := h.record("Job", ns, j.Name); err != nil {
		return nil, err
	}
	j.Spec.Template.Spec.PriorityClassName = r.opt.PriorityClass
	if _, err := r.cl.Client.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating job %s: %w", j.Name, err)
	}
	timeout := r.opt.JobTimeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	log, err := WaitJob(ctx, r.cl.Client, ns, j.Name, timeout, r.opt.StartGrace)
	if j.Labels[LabelRole] == RoleCache { // `gpuvet cache pull` emits no result: its log says what it did
		return log, err
	}
	res, xerr := ExtractResult(log)
	if xerr != nil {
		res = nil
		if err == nil {
			err = fmt.Errorf("job %s: %w", j.Name, xerr)
		}
		if hint := skewHint(log); hint != "" {
			err = fmt.Errorf("%w; %s", err, hint)
		}
	}
	return res, err
}

// skewHint names the likely cause and fix when the gpuvet in a Job's image refused a key of the
// plan ("" otherwise); the Job's own error names the key.
func skewHint(log []byte) string {
	if !bytes.Contains(log, []byte(": unknown key")) {
		return ""
	}
	return "the Job's gpuvet refused a key of the plan this gpuvet sent (\"unknown key\" in its log): its image (kubernetes.image) is likely an older gpuvet release than this one; use the image of the same release"
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
	for _, ns := range slices.Compact([]string{h.r.ns, h.r.podNS()}) {
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
