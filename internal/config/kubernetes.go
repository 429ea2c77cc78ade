package config

import (
	"fmt"
	"regexp"
	"time"
)

// Kubernetes configures backend kubernetes (docs/kubernetes.md): how gpuvet reaches the cluster,
// which GPU nodes it vets, and the objects it creates there. Every key also has a `gpuvet run`
// flag (--kubeconfig, --node-selector, …) and a GPUVET_KUBERNETES_* variable.
type Kubernetes struct {
	// Kubeconfig is the kubeconfig file; "": $KUBECONFIG, ~/.kube/config, then the in-cluster
	// service account.
	Kubeconfig string `yaml:"kubeconfig"`
	// Context is the kubeconfig context; "": the current one.
	Context string `yaml:"context"`
	// NodeSelector is a label selector the GPU nodes must match, e.g.
	// nvidia.com/gpu.product=NVIDIA-H200.
	NodeSelector string `yaml:"node_selector"`
	// Tolerations are the taints the run's pods tolerate: key[=value][:effect] each, or * for all.
	Tolerations []string `yaml:"tolerations"`
	// Nodes vets at most this many GPU nodes (0: every node with a free GPU).
	Nodes int `yaml:"nodes"`
	// ParallelNodes bounds how many nodes run at once.
	ParallelNodes int `yaml:"parallel_nodes"`
	// Image is gpuvet's own image for the in-cluster Jobs (built with ko: docs/kubernetes.md).
	Image string `yaml:"image"`
	// EngineImage is the engine's image; "": the engine kind's (vllm/vllm-openai:<engine.version>).
	EngineImage string `yaml:"engine_image"`
	// StorageClass holds the model cache; "": the cluster's default StorageClass.
	StorageClass string `yaml:"storage_class"`
	// HealthArgs are extra arguments for `gpuvet health` in each node's health Job, e.g. "--burn 60s".
	HealthArgs string `yaml:"health_args"`
	// KeepOnFailure keeps the run's namespace when something failed, for a post-mortem.
	KeepOnFailure bool `yaml:"keep_on_failure"`
	// JobTimeout bounds each in-cluster gpuvet Job (cache populate, health, load).
	JobTimeout Duration `yaml:"job_timeout"`
	// Dynamo serves each model through a DynamoGraphDeployment (NVIDIA Dynamo's operator, the CRD
	// dynamographdeployments.nvidia.com) instead of plain engine Pods.
	Dynamo bool `yaml:"dynamo"`
}

func kubernetesDefaults() Kubernetes {
	return Kubernetes{ParallelNodes: 4, JobTimeout: Duration(time.Hour)}
}

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
	kube := c.Backend == "kubernetes"
	return []check{
		{"kubernetes.image", kube && k.Image == "", "backend kubernetes needs gpuvet's own image for its in-cluster Jobs: --image REGISTRY/gpuvet:TAG (build it with `ko build ./cmd/gpuvet`, see docs/kubernetes.md)"},
		{"kubernetes.nodes", k.Nodes < 0, "want 0 (every GPU node with a free GPU) or a positive count"},
		{"kubernetes.parallel_nodes", k.ParallelNodes < 1, "want ≥ 1"},
		{"kubernetes.job_timeout", k.JobTimeout <= 0, "want a positive duration, e.g. 1h"},
		{"model_cache.size", mc.Size != "off" && !quantityRe.MatchString(mc.Size), fmt.Sprintf("want a size such as 100Gi, or off (no cache volume); got %q", mc.Size)},
		{"model_cache.access_mode", !oneOfStr(mc.AccessMode, AccessAuto, AccessRWO, AccessRWX), fmt.Sprintf("want auto (ReadWriteMany when the StorageClass's provisioner is known to support it), ReadWriteOnce or ReadWriteMany; got %q", mc.AccessMode)},
	}
}
