package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/backendkind"
)

// Kubernetes configures backend kubernetes (docs/kubernetes.md): the cluster, the GPU nodes vetted
// and the objects created there. Every key also has a `gpuvet run` flag and a GPUVET_ variable.
type Kubernetes struct {
	// Kubeconfig: "": $KUBECONFIG, ~/.kube/config, then the in-cluster service account.
	Kubeconfig string `yaml:"kubeconfig"`
	Context    string `yaml:"context"` // "": the current one
	// NodeSelector is a label selector the GPU nodes must match, e.g. nvidia.com/gpu.product=NVIDIA-H200.
	NodeSelector string `yaml:"node_selector"`
	// Tolerations are the taints the run's pods tolerate: key[=value][:effect] each, or * for all.
	Tolerations   []string `yaml:"tolerations"`
	Nodes         int      `yaml:"nodes"`          // at most this many (0: every node with a free GPU)
	ParallelNodes int      `yaml:"parallel_nodes"` // nodes run at once
	// Image is gpuvet's own image for the in-cluster Jobs (built with ko: docs/kubernetes.md).
	Image        string `yaml:"image"`
	EngineImage  string `yaml:"engine_image"`  // "": the engine kind's (vllm/vllm-openai:<engine.version>)
	StorageClass string `yaml:"storage_class"` // of the model cache; "": the cluster's default
	// HealthArgs are extra arguments for `gpuvet health` in each node's health Job, e.g. "--burn 60s".
	HealthArgs    string   `yaml:"health_args"`
	KeepOnFailure bool     `yaml:"keep_on_failure"` // keep the namespace when something failed
	JobTimeout    Duration `yaml:"job_timeout"`     // each in-cluster Job's (cache populate, health, load)
	// StartGrace is how long a pod may keep failing to start with an error Kubernetes retries (an
	// image pull: a registry's 429 or a timeout; a volume's mount or attach; the pod's network
	// sandbox) before its node fails; a missing image or refused credentials fail at once.
	StartGrace Duration `yaml:"start_grace"`
	// Dynamo serves each model through a DynamoGraphDeployment (NVIDIA Dynamo's operator) instead
	// of plain engine Pods.
	Dynamo bool `yaml:"dynamo"`
	// CacheOwnerInit gives the populate Job an init container (root with only CAP_CHOWN and
	// CAP_FOWNER) that hands the cache volume's root to the image's user (65532) where fsGroup does
	// not (hostPath, NFS). false where root containers are refused (OpenShift's restricted SCC):
	// the provisioner must then apply fsGroup (CSI block volumes do).
	CacheOwnerInit bool `yaml:"cache_owner_init"`
	// CacheNamespace keeps the model cache's PVCs beyond the run for the next one; the pods that
	// mount the cache run there (a pod mounts only its own namespace's PVCs), removed with the run;
	// the PVCs stay until `gpuvet clean --cache`. "": the run's namespace (every run downloads).
	CacheNamespace string `yaml:"cache_namespace"`
	// CacheNamespaceAllowExisting lets the cache go into an existing cache_namespace gpuvet did not
	// create (no gpuvet.io/cache label), refused otherwise. The cluster's own (default, kube-*) are
	// always refused, and `gpuvet clean --cache` never deletes a namespace gpuvet did not create.
	CacheNamespaceAllowExisting bool `yaml:"cache_namespace_allow_existing"`
	// DynamoTarget is where the Dynamo load and completion check go: pod (a Ready frontend pod: no
	// Service proxy in the measured path) or service (its ClusterIP, through kube-proxy).
	DynamoTarget string `yaml:"dynamo_target"`

	// Verdicts written onto each judged node (docs/kubernetes.md, "Labels and taints"). LabelNodes:
	// labels gpuvet.io/status and gpuvet.io/run, annotation gpuvet.io/vetted-at. TaintFailed: a
	// failed node gets gpuvet.io/unhealthy=<run id>:NoSchedule and its reason in an annotation;
	// TaintFlagged: a flagged one too. `gpuvet clean --untaint` lifts them.
	LabelNodes   bool `yaml:"label_nodes"`
	TaintFailed  bool `yaml:"taint_failed"`
	TaintFlagged bool `yaml:"taint_flagged"`
	// Gate is the acceptance gate (docs/acceptance.md): nodes tainted
	// gpuvet.io/validation-pending:NoSchedule are vetted first; ok lifts the taint, flag or failed
	// makes it the quarantine taint, inconclusive keeps it pending.
	Gate bool `yaml:"gate"`
	// PendingRetries is how many runs in a row may leave a pending node undecided before the run
	// says it needs a person (it stays pending either way).
	PendingRetries int  `yaml:"pending_retries"`
	OnlyDue        bool `yaml:"only_due"` // vet only nodes pending, with an expired verdict, or none
	// VerdictValidFor is how long a verdict holds (gpuvet.io/valid-until); 0: no expiry.
	VerdictValidFor Duration `yaml:"verdict_valid_for"`
	// MaxUnhealthy is the circuit breaker: the most nodes one run may quarantine, a count ("5") or
	// a share of the nodes vetted ("10%"); past it the rest are only reported and the run fails.
	MaxUnhealthy string `yaml:"max_unhealthy"`
	// PriorityClass of the pods a run creates (not a DynamoGraphDeployment's): a low one
	// (docs/kubernetes-cronjob.yaml's gpuvet-low) lets real work preempt a run. "": the default.
	PriorityClass string `yaml:"priority_class"`
	// DryRun takes no action on any node: it prints and records each one it would take
	// (fleet.node_actions).
	DryRun bool `yaml:"dry_run"`
	// QPS and Burst bound gpuvet's API requests (client-go's token bucket): sustained a second, and
	// at once. Requests per node are bounded (watches, not polls: docs/k8s-scale.md), so at scale
	// these set how fast nodes start; the server's own limits answer 429, which gpuvet backs off on.
	QPS   float64 `yaml:"qps"`
	Burst int     `yaml:"burst"`
}

// kubernetes.dynamo_target values.
const (
	DynamoTargetPod     = "pod"
	DynamoTargetService = "service"
)

func kubernetesDefaults() Kubernetes {
	return Kubernetes{ParallelNodes: 4, JobTimeout: Duration(time.Hour), StartGrace: Duration(5 * time.Minute), CacheOwnerInit: true, CacheNamespace: DefaultCacheNamespace, DynamoTarget: DynamoTargetPod,
		QPS: 50, Burst: 100, PendingRetries: 3, VerdictValidFor: Duration(7 * 24 * time.Hour), MaxUnhealthy: DefaultMaxUnhealthy}
}

// DefaultMaxUnhealthy is the circuit breaker's default limit (kubernetes.max_unhealthy; the Slurm
// backend's drains take the same): one node in ten. A fault rarely takes a tenth of a healthy
// fleet at once; a wrong setting takes all of it.
const DefaultMaxUnhealthy = "10%"

// DefaultCacheNamespace is kubernetes.cache_namespace's default: the namespace that keeps the model
// cache between runs.
const DefaultCacheNamespace = "gpuvet-cache"

// ClusterNamespace says whether ns is one of the cluster's own namespaces (default, kube-system,
// kube-public, kube-node-lease, any kube-*): gpuvet creates nothing there, whatever is allowed.
func ClusterNamespace(ns string) bool { return ns == "default" || strings.HasPrefix(ns, "kube-") }

// dnsLabelRe is a DNS-1123 label (a namespace name).
var dnsLabelRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Model cache PVC access modes (model_cache.access_mode, backend kubernetes).
const (
	AccessAuto = "auto"
	AccessRWO  = "ReadWriteOnce"
	AccessRWX  = "ReadWriteMany"
)

// quantityRe is the form of a Kubernetes storage size (100Gi, 500G, 1.5Ti).
var quantityRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$`)

// kubernetesChecks are the rules over kubernetes.* and the cluster's model cache.
func kubernetesChecks(c Config) []check {
	k, mc := c.Kubernetes, c.ModelCache
	kube := backendkind.UsesSection(c.Backend, "kubernetes")
	return []check{
		{"kubernetes.image", kube && k.Image == "", "backend kubernetes needs gpuvet's own image for its in-cluster Jobs: --image REGISTRY/gpuvet:TAG (build it with `ko build ./cmd/gpuvet`, see docs/kubernetes.md)"},
		{"kubernetes.nodes", k.Nodes < 0, "want 0 (every GPU node with a free GPU) or a positive count"},
		{"kubernetes.parallel_nodes", k.ParallelNodes < 1, "want ≥ 1"},
		errCheck("kubernetes.max_unhealthy", errOf(ParseMaxUnhealthy(k.MaxUnhealthy))),
		{"kubernetes.cache_namespace", k.CacheNamespace != "" && !dnsLabelRe.MatchString(k.CacheNamespace), fmt.Sprintf("want a namespace name (a DNS label: lower case, digits and '-', at most 63), or \"\" for the run's own namespace (the cache then goes with the run); got %q", k.CacheNamespace)},
		{"kubernetes.cache_namespace", ClusterNamespace(k.CacheNamespace), fmt.Sprintf("%s is the cluster's own namespace: gpuvet never puts its cache PVCs and Jobs there (nor in default or any kube-*); name a namespace of gpuvet's own (default %s)", k.CacheNamespace, DefaultCacheNamespace)},
		{"kubernetes.dynamo_target", !slices.Contains([]string{DynamoTargetPod, DynamoTargetService}, k.DynamoTarget), fmt.Sprintf("want pod (a Ready frontend pod's address) or service (the frontend Service's ClusterIP); got %q", k.DynamoTarget)},
		{"kubernetes.job_timeout", k.JobTimeout <= 0, "want a positive duration, e.g. 1h"},
		{"kubernetes.start_grace", k.StartGrace < 0, "want how long a pod may keep failing to start with an error Kubernetes retries (an image pull, a volume mount, its network sandbox), e.g. 5m, or 0 to fail at the first such error"},
		{"kubernetes.pending_retries", k.PendingRetries < 1, fmt.Sprintf("want how many undecided runs in a row a pending node gets before a person is asked, ≥ 1 (default 3); got %d", k.PendingRetries)},
		{"kubernetes.verdict_valid_for", k.VerdictValidFor < 0, "want how long a verdict holds, e.g. 168h, or 0 for no expiry"},
		{"kubernetes.qps", !(k.QPS > 0 && k.QPS <= 10000), fmt.Sprintf("want the API requests a second gpuvet may send, > 0 and ≤ 10000 (default 50); got %v", k.QPS)},
		{"kubernetes.burst", k.Burst < 1 || k.Burst > 100000 || (k.QPS > 0 && float64(k.Burst) < k.QPS), fmt.Sprintf("want how many API requests may go at once, ≥ 1, ≥ kubernetes.qps (%v) and ≤ 100000 (default 100); got %d", k.QPS, k.Burst)},
		{"model_cache.size", mc.Size != "off" && !quantityRe.MatchString(mc.Size), fmt.Sprintf("want a size such as 100Gi, or off (no cache volume); got %q", mc.Size)},
		{"model_cache.endpoint", mc.Endpoint != "" && HubURLProblem(mc.Endpoint) != "", HubURLProblem(mc.Endpoint)},
		{"model_cache.access_mode", !slices.Contains([]string{AccessAuto, AccessRWO, AccessRWX}, mc.AccessMode), fmt.Sprintf("want auto (ReadWriteMany when the StorageClass's provisioner is known to support it), ReadWriteOnce or ReadWriteMany; got %q", mc.AccessMode)},
	}
}

// HubURLProblem says what is wrong with a hub mirror URL ("" when nothing): it must be an absolute
// http(s) URL, without credentials (a token goes in HF_TOKEN, never in a URL that lands in
// manifests and logs).
func HubURLProblem(s string) string {
	u, err := url.Parse(s)
	if err == nil && u.User != nil {
		return "the URL holds credentials: give the hub token in HF_TOKEN (engine.token_env), never in the URL, which is written to manifests and logs"
	}
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Sprintf("want the hub mirror's http(s) URL, e.g. https://hf-mirror.example.com; got %q", s)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Sprintf("want a base URL without query or fragment; got %q", u.Redacted())
	}
	return ""
}
