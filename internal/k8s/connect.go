// Package k8s is the Kubernetes backend: it vets a cluster's GPU nodes in place through the API
// (client-go). Per run: check access, choose the GPU nodes, create a namespace labelled with the run
// id, a model cache with populate Jobs, a health Job per node, engine Pods pinned to their node (or
// a DynamoGraphDeployment), and a load Job per engine next to the GPU; results come back from the
// Jobs' logs between markers. The namespace is deleted at the end and waited for. Every object is
// in the run manifest before it is created, so `gpuvet clean` can remove what a killed run left.
package k8s

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuvet/gpuvet/internal/config"
)

// Cluster is a connected API client and where it points.
type Cluster struct {
	Client   kubernetes.Interface
	Dynamic  dynamic.Interface // custom resources (DynamoGraphDeployment)
	Config   *rest.Config
	Context  string // the kubeconfig context used ("in-cluster" inside a pod)
	Server   string
	Requests *RequestCount // HTTP requests sent to the API server (retries and watches included)
}

// Limits bound the client's request rate (client-go's token bucket): QPS sustained, Burst at once
// (kubernetes.qps, kubernetes.burst). Watches hold no token once they run.
type Limits struct {
	QPS   float32
	Burst int
}

// DefaultLimits are kubernetes.qps and kubernetes.burst's defaults (config.Defaults is their home).
func DefaultLimits() Limits {
	k := config.Defaults().Kubernetes
	return Limits{QPS: float32(k.QPS), Burst: k.Burst}
}

// ConnectWith follows the usual kubeconfig rules: --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config, else the in-cluster service account; --context picks a context. The client sends
// at most lim.QPS requests a second (lim.Burst at once).
func ConnectWith(kubeconfig, kubeContext string, lim Limits) (*Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		if _, err := os.Stat(kubeconfig); err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
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
			return nil, fmt.Errorf("kubeconfig: %w (check --kubeconfig, KUBECONFIG and --context)", err)
		}
		cfg, err = rest.InClusterConfig()
		if err != nil {
			if errors.Is(err, rest.ErrNotInCluster) {
				return nil, errors.New("no kubeconfig found and not running in a cluster: give --kubeconfig FILE or set KUBECONFIG")
			}
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
		name = "in-cluster"
	}
	cfg.UserAgent = "gpuvet"
	if lim.QPS <= 0 || lim.Burst < 1 {
		lim = DefaultLimits()
	}
	cfg.QPS, cfg.Burst = lim.QPS, lim.Burst
	count := CountRequests(cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	return &Cluster{Client: cs, Dynamic: dyn, Config: cfg, Context: name, Server: cfg.Host, Requests: count}, nil
}

// RequestCount is how many HTTP requests a client sent.
type RequestCount struct{ n atomic.Int64 }

// Load is the count so far (0 for a nil count).
func (c *RequestCount) Load() int64 {
	if c == nil {
		return 0
	}
	return c.n.Load()
}

// CountRequests makes every client built from cfg count the requests it sends into the returned
// count (below client-go's rate limiter and retries: what reaches the wire).
func CountRequests(cfg *rest.Config) *RequestCount {
	c := &RequestCount{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			c.n.Add(1)
			return rt.RoundTrip(r)
		})
	})
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
