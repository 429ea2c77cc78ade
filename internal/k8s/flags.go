package k8s

import (
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/modelcache"
)

// ConnectFlags adds --kubeconfig and --context (run, config show, clean); they set
// kubernetes.kubeconfig and kubernetes.context.
func ConnectFlags(fl *pflag.FlagSet) {
	fl.String("kubeconfig", "", "backend kubernetes: kubeconfig file (kubernetes.kubeconfig; default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fl.String("context", "", "backend kubernetes: kubeconfig context (kubernetes.context; default: the current one)")
}

// Flags adds the Kubernetes flags to a command that resolves a plan (run, config show), which reads
// them through the plan; the defaults shown are the keys'. --dry-run is the command's (slurm's too).
func Flags(fl *pflag.FlagSet) {
	d := config.Defaults()
	ConnectFlags(fl)
	fl.String("node-selector", "", "backend kubernetes: only nodes matching this label selector, e.g. nvidia.com/gpu.product=NVIDIA-H200")
	fl.String("tolerations", "", "backend kubernetes: taints to tolerate: key[=value][:effect],… (* tolerates all)")
	fl.Int("nodes", d.Kubernetes.Nodes, "backend kubernetes: vet at most N GPU nodes (0: all with a free GPU)")
	fl.Int("parallel-nodes", d.Kubernetes.ParallelNodes, "backend kubernetes: how many nodes run at once")
	fl.String("image", "", "backend kubernetes: gpuvet's own image for the in-cluster Jobs (see docs/kubernetes.md: ko build)")
	fl.String("engine-image", "", "backend kubernetes: the engine image (default vllm/vllm-openai:v<engine.version>)")
	fl.String("cache-size", d.ModelCache.Size, "backend kubernetes: model-cache PVC size, or off (model_cache.size)")
	fl.String("cache-access-mode", d.ModelCache.AccessMode, "backend kubernetes: model-cache PVC access: auto, ReadWriteOnce (one per node) or ReadWriteMany (one shared)")
	fl.String("storage-class", "", "backend kubernetes: StorageClass of the model cache (default: the cluster's default)")
	fl.String("health-args", "", "backend kubernetes: extra arguments for 'gpuvet health' in each node's health Job, e.g. '--burn 60s'")
	fl.Bool("keep-on-failure", false, "backend kubernetes: keep the run's namespace when something failed")
	fl.Duration("job-timeout", d.Kubernetes.JobTimeout.D(), "backend kubernetes: limit for each in-cluster gpuvet Job")
	fl.Duration("start-grace", d.Kubernetes.StartGrace.D(), "backend kubernetes: how long a pod may keep failing to start with an error Kubernetes retries (an image pull, a volume mount, its network sandbox) before its node fails; a missing image fails at once")
	fl.Bool("dynamo", false, "backend kubernetes: serve through a DynamoGraphDeployment (needs the dynamographdeployments.nvidia.com CRD)")
	fl.String("hub-endpoint", "", "the hub (or mirror) the model cache is filled from (model_cache.endpoint; default $HF_ENDPOINT, else "+modelcache.DefaultEndpoint+")")
	fl.String("cache-namespace", d.Kubernetes.CacheNamespace, "backend kubernetes: the namespace that keeps the model cache between runs (\"\": the run's own, deleted with it; 'gpuvet clean --cache' removes it)")
	fl.String("dynamo-target", d.Kubernetes.DynamoTarget, "backend kubernetes: where the Dynamo load goes: pod (a Ready frontend pod) or service (the frontend Service's ClusterIP, through kube-proxy)")
	fl.Bool("label-nodes", false, "backend kubernetes: label each vetted node with its judged status (gpuvet.io/status=ok|inconclusive|flag|failed, gpuvet.io/run=RUN_ID); needs nodes patch")
	fl.Bool("taint-failed", false, "backend kubernetes: taint each failed node gpuvet.io/unhealthy=RUN_ID:NoSchedule, the reason in an annotation (lift with 'gpuvet clean --untaint'); needs nodes get, patch")
	fl.Bool("taint-flagged", false, "backend kubernetes: taint flagged nodes as well as failed ones (implies --taint-failed)")
	fl.Bool("gate", false, "backend kubernetes: the acceptance gate (docs/acceptance.md): a node tainted "+TaintPending+":NoSchedule is vetted first; ok lifts the taint, flag or failed quarantines it, inconclusive keeps it pending; needs nodes get, patch, patch nodes/status")
	fl.Int("pending-retries", d.Kubernetes.PendingRetries, "backend kubernetes: undecided runs in a row a pending node gets before the run says it needs a person (it stays pending)")
	fl.Bool("only-due", false, "backend kubernetes: vet only nodes that are due: pending, their verdict expired, or none")
	fl.Duration("verdict-valid-for", d.Kubernetes.VerdictValidFor.D(), "backend kubernetes: how long a node's verdict holds (annotation "+AnnotationValidUntil+"); past it the node is due (0: no expiry)")
	fl.String("max-unhealthy", d.Kubernetes.MaxUnhealthy, "backend kubernetes: circuit breaker: the most nodes one run may quarantine, a count (5) or a share of the nodes vetted (10%); past it the rest are only reported and the run fails")
	fl.String("priority-class", "", "backend kubernetes: the PriorityClass of the pods a run creates (a low one lets real work preempt a vetting run; docs/acceptance.md)")
	fl.Bool("cache-owner-init", d.Kubernetes.CacheOwnerInit, "backend kubernetes: the populate Job's root init container that chowns the cache volume's root (false where root containers are refused; the StorageClass must then apply fsGroup)")
}
