package config

import (
	"strings"
	"testing"
	"time"
)

// Every kubernetes.* key and the cache PVC's size and access mode come from a file, the
// environment and --set, in that order of precedence, and record their source.
func TestKubernetesKeys(t *testing.T) {
	f := write(t, "k.yaml", "backend: kubernetes\nkubernetes:\n  image: reg/gpuvet:v1\n  nodes: 2\n  tolerations: ['*']\n  keep_on_failure: true\nmodel_cache:\n  size: 20Gi\n")
	p, err := Load(Options{Files: []string{f},
		Environ: []string{"GPUVET_KUBERNETES_NODES=3", "GPUVET_KUBERNETES_NODE_SELECTOR=nvidia.com/gpu.product=NVIDIA-H200",
			"GPUVET_MODEL_CACHE_ACCESS_MODE=ReadWriteMany", "GPUVET_KUBERNETES_JOB_TIMEOUT=20m"},
		Sets:  []string{"kubernetes.parallel_nodes=2", "kubernetes.tolerations=gpu=yes:NoSchedule,dedicated", "kubernetes.qps=200", "kubernetes.burst=400"},
		Flags: []Flag{{Name: "--cache-size", Path: "model_cache.size", Value: "off"}}})
	if err != nil {
		t.Fatal(err)
	}
	k := p.Config.Kubernetes
	// Files beat the environment, --set beats both, named flags beat everything.
	if k.Image != "reg/gpuvet:v1" || k.Nodes != 2 || !k.KeepOnFailure || k.ParallelNodes != 2 || k.JobTimeout.D() != 20*time.Minute ||
		k.NodeSelector != "nvidia.com/gpu.product=NVIDIA-H200" || strings.Join(k.Tolerations, "|") != "gpu=yes:NoSchedule|dedicated" {
		t.Errorf("kubernetes = %+v", k)
	}
	if k.QPS != 200 || k.Burst != 400 {
		t.Errorf("kubernetes.qps/burst = %v/%d", k.QPS, k.Burst)
	}
	if d := Defaults().Kubernetes; d.QPS != 50 || d.Burst != 100 {
		t.Errorf("default qps/burst = %v/%d", d.QPS, d.Burst)
	}
	if p.Config.ModelCache.Size != "off" || p.Config.ModelCache.AccessMode != AccessRWX {
		t.Errorf("model_cache = %+v", p.Config.ModelCache)
	}
	for key, want := range map[string]string{"kubernetes.nodes": "config:" + f, "kubernetes.job_timeout": "env:GPUVET_KUBERNETES_JOB_TIMEOUT",
		"kubernetes.parallel_nodes": "flag:--set", "model_cache.size": "flag:--cache-size", "kubernetes.context": "default"} {
		if got := p.Source(key); got != want {
			t.Errorf("source of %s = %q, want %q", key, got, want)
		}
	}
}

// A bad kubernetes value stops the plan, naming the key, where it came from and what to do.
func TestKubernetesBadValues(t *testing.T) {
	tests := []struct {
		env  []string
		sets []string
		want []string
	}{
		{sets: []string{"backend=kubernetes"}, want: []string{"kubernetes.image", "--image", "ko build"}},
		{env: []string{"GPUVET_MODEL_CACHE_SIZE=100 GB"}, want: []string{"GPUVET_MODEL_CACHE_SIZE: model_cache.size", "100Gi, or off"}},
		{sets: []string{"model_cache.access_mode=RWX"}, want: []string{"model_cache.access_mode", "ReadWriteOnce or ReadWriteMany", `"RWX"`}},
		{sets: []string{"kubernetes.nodes=-1"}, want: []string{"kubernetes.nodes", "positive count"}},
		{env: []string{"GPUVET_KUBERNETES_PARALLEL_NODES=0"}, want: []string{"GPUVET_KUBERNETES_PARALLEL_NODES", "kubernetes.parallel_nodes", "≥ 1"}},
		{sets: []string{"kubernetes.job_timeout=0"}, want: []string{"kubernetes.job_timeout", "positive duration"}},
		{sets: []string{"kubernetes.qps=0"}, want: []string{"kubernetes.qps", "> 0 and ≤ 10000", "got 0"}},
		{env: []string{"GPUVET_KUBERNETES_BURST=20"}, sets: []string{"kubernetes.qps=100"}, want: []string{"GPUVET_KUBERNETES_BURST", "kubernetes.burst", "≥ kubernetes.qps (100)", "got 20"}},
		{sets: []string{"kubernetes.burst=x"}, want: []string{"kubernetes.burst"}},
		{sets: []string{"kubernetes.dynamo=maybe"}, want: []string{"kubernetes.dynamo"}},
		// Finding 7 of issue 43: the cluster's own namespaces never hold gpuvet's cache.
		{sets: []string{"kubernetes.cache_namespace=kube-system"}, want: []string{"kubernetes.cache_namespace", "kube-system is the cluster's own"}},
		{env: []string{"GPUVET_KUBERNETES_CACHE_NAMESPACE=default"}, want: []string{"kubernetes.cache_namespace", "default is the cluster's own"}},
		{sets: []string{"kubernetes.cache_namespace=kube-node-lease", "kubernetes.cache_namespace_allow_existing=true"}, want: []string{"kubernetes.cache_namespace", "kube-node-lease is the cluster's own"}},
		{env: []string{"GPUVET_KUBERNETES_IMAGES=x"}, want: []string{"GPUVET_KUBERNETES_IMAGES", "did you mean GPUVET_KUBERNETES_IMAGE"}},
	}
	for _, tt := range tests {
		_, err := Load(Options{Environ: tt.env, Sets: tt.sets})
		if err == nil {
			t.Errorf("%v %v: no error", tt.env, tt.sets)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v %v: error %q lacks %q", tt.env, tt.sets, err, w)
			}
		}
	}
}

// An aicr recipe that deploys Dynamo's platform asks for a DynamoGraphDeployment.
func TestRecipeAsksForDynamo(t *testing.T) {
	p, err := Load(Options{Files: []string{"testdata/gb200-eks-ubuntu-inference-dynamo.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Config.Kubernetes.Dynamo || !strings.HasPrefix(p.Source("kubernetes.dynamo"), "recipe:") {
		t.Errorf("dynamo %v from %q", p.Config.Kubernetes.Dynamo, p.Source("kubernetes.dynamo"))
	}
	if d, _ := Load(Options{}); d.Config.Kubernetes.Dynamo {
		t.Error("dynamo on by default")
	}
}

// Finding 5 of issue 43: a URL's key-like query values are recorded nowhere (summary settings,
// config show), while the URL the client uses keeps them; its password never stays in the config.
func TestURLSecretsNotInSettings(t *testing.T) {
	p, err := Load(Options{Sets: []string{"endpoint.url=http://u:CANARY1@h:8000/v1?api_key=CANARY2&x=1"}})
	if err != nil {
		t.Fatal(err)
	}
	var show strings.Builder
	p.Show(&show)
	for k, v := range p.Settings() {
		if strings.Contains(v, "CANARY") {
			t.Errorf("settings %s = %s", k, v)
		}
	}
	if strings.Contains(show.String(), "CANARY") {
		t.Errorf("config show:\n%s", show.String())
	}
	if p.Config.Endpoint.URL != "http://h:8000/v1?api_key=CANARY2&x=1" || p.EndpointURLKey != "CANARY1" {
		t.Errorf("the URL the client uses: %q, key %q", p.Config.Endpoint.URL, p.EndpointURLKey)
	}
}
