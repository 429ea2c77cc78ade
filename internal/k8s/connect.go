// Package k8s is the Kubernetes backend: it vets a cluster's GPU nodes in place through the API
// (client-go). Per run: check access (SelfSubjectAccessReview per verb and resource), choose the GPU
// nodes, create one namespace labelled with the run id, a model cache (one shared ReadWriteMany PVC,
// or one ReadWriteOnce PVC per node) with populate Jobs, a health Job per node, one engine Pod per
// GPU (or tp GPUs) pinned to its node (or a DynamoGraphDeployment), a Job checking a real completion
// from each, and one load Job per engine that runs gpuvet itself next to the GPU against the
// engine's pod address; results come back from the Jobs' logs between markers. The namespace is deleted at the end and waited for.
// Every object is written to the run manifest before it is created, so `gpuvet clean` can remove
// what a killed run left.
package k8s

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is a connected API client and where it points.
type Cluster struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface // custom resources (DynamoGraphDeployment)
	Config  *rest.Config
	Context string // the kubeconfig context used ("in-cluster" inside a pod)
	Server  string
}

// Connect follows the usual kubeconfig rules: --kubeconfig, else $KUBECONFIG, else ~/.kube/config,
// else the in-cluster service account; --context picks a context.
func Connect(kubeconfig, kubeContext string) (*Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		if _, err := os.Stat(kubeconfig); err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %v", kubeconfig, err)
		}
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := cc.ClientConfig()
	name := kubeContext
	if err == nil && name == "" {
		if raw, rerr := cc.RawConfig(); rerr == nil {
			name = raw.CurrentContext
		}
		if name == "" { // no kubeconfig: clientcmd fell back to the pod's service account itself
			name = "in-cluster"
		}
	}
	if err != nil {
		if kubeconfig != "" || kubeContext != "" || !clientcmd.IsEmptyConfig(err) {
			return nil, fmt.Errorf("kubeconfig: %v (check --kubeconfig, KUBECONFIG and --context)", err)
		}
		cfg, err = rest.InClusterConfig()
		if err != nil {
			if errors.Is(err, rest.ErrNotInCluster) {
				return nil, errors.New("no kubeconfig found and not running in a cluster: give --kubeconfig FILE or set KUBECONFIG")
			}
			return nil, fmt.Errorf("in-cluster config: %v", err)
		}
		name = "in-cluster"
	}
	cfg.UserAgent = "gpuvet"
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %v", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes dynamic client: %v", err)
	}
	return &Cluster{Client: cs, Dynamic: dyn, Config: cfg, Context: name, Server: cfg.Host}, nil
}
