package k8s

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/enginekind"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/results"
)

// With kubernetes.dynamo, each node serves a model through a DynamoGraphDeployment (NVIDIA Dynamo's
// operator), as aicr's inference check deploys it: one Frontend and one VllmDecodeWorker per
// engine.tp GPUs, pinned to the node, the workers on the model cache read-only. Once it is Ready
// and a real completion came through the frontend, the load Job runs against it (frontendURL).
// Unstructured objects through the dynamic client: no Dynamo Go module.

// DynamoGVR is the DynamoGraphDeployment resource gpuvet creates (Dynamo ≥ 1.0 serves v1beta1).
var DynamoGVR = schema.GroupVersionResource{Group: "nvidia.com", Version: "v1beta1", Resource: "dynamographdeployments"}

// DynamoImage is the default worker and frontend image: Dynamo's vLLM runtime (aicr's version).
const DynamoImage = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1-cuda13"

// Labels the Dynamo operator puts on the pods of a DynamoGraphDeployment.
const (
	LabelDynamoGraph     = "nvidia.com/dynamo-graph-deployment-name"
	LabelDynamoComponent = "nvidia.com/dynamo-component"
)

// Component names in the DynamoGraphDeployment (the frontend Service is <name>-frontend).
const (
	DynamoFrontend = "Frontend"
	DynamoWorker   = "VllmDecodeWorker"
)

// CheckDynamo fails unless the cluster serves DynamoGraphDeployments at the version gpuvet writes,
// naming what to do (before anything is created).
func (c *Cluster) CheckDynamo(kind string) error {
	if !enginekind.Get(kind).Dynamo {
		return fmt.Errorf("kubernetes.dynamo: gpuvet deploys Dynamo's vLLM workers (as aicr's inference check does); engine.kind is %s: set engine.kind vllm, or kubernetes.dynamo false for plain engine pods", kind)
	}
	has := func(gv string) bool {
		l, err := c.Client.Discovery().ServerResourcesForGroupVersion(gv)
		return err == nil && slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == DynamoGVR.Resource })
	}
	switch {
	case has(DynamoGVR.GroupVersion().String()):
		if c.Dynamic == nil {
			return errors.New("kubernetes.dynamo: no dynamic client (a bug)")
		}
		return nil
	case has("nvidia.com/v1alpha1"):
		return errors.New("kubernetes.dynamo: this cluster's DynamoGraphDeployment CRD serves only nvidia.com/v1alpha1; gpuvet writes v1beta1 (Dynamo ≥ 1.0): upgrade the Dynamo platform, or set kubernetes.dynamo false for plain engine pods")
	}
	return errors.New("kubernetes.dynamo: the cluster has no DynamoGraphDeployment CRD (dynamographdeployments.nvidia.com): install NVIDIA Dynamo's platform (its operator and CRDs), or set kubernetes.dynamo false (--dynamo=false) to serve with plain engine pods")
}

// DynamoSpec is what one node's DynamoGraphDeployment serves.
type DynamoSpec struct {
	Name, Node, Image, Model string
	Workers, TP              int
	ExtraArgs                []string
	Env                      map[string]string
	CachePVC                 string
	TokenSecret              string // HF_TOKEN's Secret ("": none)
	Tolerations              []corev1.Toleration
}

// toMap turns a typed API object into its unstructured form (the JSON the API server reads).
func toMap(v any) map[string]any {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v)
	if err != nil {
		panic(err) // typed API structs always convert
	}
	return m
}

// dynamoGraph is one node's DynamoGraphDeployment.
func dynamoGraph(runID string, d DynamoSpec) *unstructured.Unstructured {
	pin := func(c corev1.Container, vols []corev1.Volume) map[string]any {
		return toMap(&corev1.PodTemplateSpec{Spec: corev1.PodSpec{Affinity: pinToNode(d.Node), Tolerations: d.Tolerations,
			Containers: []corev1.Container{c}, Volumes: vols}})
	}
	env := envVars(d.Env)
	if d.TokenSecret != "" {
		env = append(env, tokenEnvVar(d.TokenSecret))
	}
	front := corev1.Container{Name: "main", Image: d.Image, Env: append(append([]corev1.EnvVar{}, env...), corev1.EnvVar{Name: "SERVED_MODEL_NAME", Value: d.Model})}
	args := []string{"--model", d.Model}
	if d.TP > 1 {
		args = append(args, "--tensor-parallel-size", strconv.Itoa(d.TP))
	}
	worker := corev1.Container{Name: "main", Image: d.Image, Command: []string{"python3", "-m", "dynamo.vllm"},
		Args: append(args, d.ExtraArgs...), Env: env,
		Resources: corev1.ResourceRequirements{Limits: gpuQuantity(max(1, d.TP))}}
	vols := readCache(&worker, d.CachePVC)
	labels := map[string]any{}
	for k, v := range runLabels(runID, RoleEngine, d.Node) {
		labels[k] = v
	}
	labels[LabelModel] = labelValue(d.Model)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": DynamoGVR.GroupVersion().String(), "kind": "DynamoGraphDeployment",
		"metadata": map[string]any{"name": d.Name, "labels": labels},
		"spec": map[string]any{
			"backendFramework": "vllm",
			"components": []any{
				map[string]any{"name": DynamoFrontend, "type": "frontend", "replicas": int64(1), "podTemplate": pin(front, nil)},
				map[string]any{"name": DynamoWorker, "type": "worker", "replicas": int64(d.Workers), "podTemplate": pin(worker, vols)},
			},
		},
	}}
}

// dynamoReady reports whether the operator says the deployment is successful and every desired
// component has all its replicas Ready; otherwise it says what it waits for.
func dynamoReady(obj *unstructured.Unstructured) (bool, string) {
	state, _, _ := unstructured.NestedString(obj.Object, "status", "state")
	comps, _, _ := unstructured.NestedSlice(obj.Object, "spec", "components")
	status, _, _ := unstructured.NestedMap(obj.Object, "status", "components")
	var waiting []string
	valid := 0 // components gpuvet can read: an operator's object may hold anything
	for _, c := range comps {
		cm, ok := c.(map[string]any)
		name, _, _ := unstructured.NestedString(cm, "name")
		if !ok || name == "" {
			continue
		}
		valid++
		want, found, _ := unstructured.NestedInt64(cm, "replicas")
		if !found {
			want = 1
		}
		sm, _ := status[name].(map[string]any)
		ready, _, _ := unstructured.NestedInt64(sm, "readyReplicas")
		if ready < want {
			waiting = append(waiting, fmt.Sprintf("%s %d/%d Ready", name, ready, want))
		}
	}
	if state != "successful" {
		waiting = append([]string{fmt.Sprintf("state %q", state)}, waiting...)
	}
	if valid == 0 {
		waiting = append(waiting, "no named component in spec.components")
	}
	return len(waiting) == 0, strings.Join(waiting, ", ")
}

// waitDynamo waits until the deployment is ready, failing at once when one of its pods cannot
// start (the same reasons as engine pods: unschedulable, image pull, crash loop, OOMKilled).
func (h *nodeHost) waitDynamo(parent context.Context, name string, timeout time.Duration) error {
	r := h.r
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	last, starts := "not created yet", newStartWait(r.opt.StartGrace)
	over, err := pollUntil(ctx, func() (bool, error) {
		obj, err := r.cl.Dynamic.Resource(DynamoGVR).Namespace(r.podNS()).Get(ctx, name, metav1.GetOptions{})
		if err != nil && ctx.Err() == nil {
			return false, fmt.Errorf("DynamoGraphDeployment %s: %w", name, err)
		}
		if err == nil {
			var ok bool
			if ok, last = dynamoReady(obj); ok {
				return true, nil
			}
		}
		pods, err := r.cl.Client.CoreV1().Pods(r.podNS()).List(ctx, metav1.ListOptions{LabelSelector: LabelDynamoGraph + "=" + name})
		for i := 0; err == nil && i < len(pods.Items); i++ {
			p := &pods.Items[i]
			if pe := podProblem(p, tailLogs(ctx, r.cl.Client, r.podNS(), p.Name), starts); pe != nil {
				return false, fmt.Errorf("DynamoGraphDeployment %s: %w", name, pe)
			}
		}
		return false, nil
	})
	if !over {
		return err
	}
	if err := interrupted(parent); err != nil {
		return fmt.Errorf("DynamoGraphDeployment %s (%s): %w", name, last, err)
	}
	return fmt.Errorf("DynamoGraphDeployment %s not ready after %s: %s (raise engine.ready_timeout)", name, timeout, last)
}

// frontendURL is the address of a Ready pod behind the deployment's frontend Service (or, with
// DynamoService, the Service's), waited for: the Service may appear a moment after the deployment
// is Ready. A pod address needs no cluster DNS or Service proxy in the load's path.
func (h *nodeHost) frontendURL(ctx context.Context, name string, wait time.Duration) (string, error) {
	r := h.r
	svcName := name + "-frontend"
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	last, url := "no such Service", ""
	over, err := pollUntil(ctx, func() (bool, error) {
		svc, err := r.cl.Client.CoreV1().Services(r.podNS()).Get(ctx, svcName, metav1.GetOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) && ctx.Err() == nil {
				return false, fmt.Errorf("frontend Service %s: %w", svcName, err)
			}
			return false, nil
		}
		last = "no Ready pod matches its selector"
		if len(svc.Spec.Selector) == 0 {
			return false, fmt.Errorf("frontend Service %s has no selector", svcName)
		}
		pods, err := r.cl.Client.CoreV1().Pods(r.podNS()).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
		if err != nil {
			return false, nil
		}
		if url = frontendAddress(svc, pods.Items); url != "" && r.opt.DynamoService {
			url, err = serviceAddress(svc)
			return true, err
		}
		return url != "", nil
	})
	if over {
		return "", fmt.Errorf("frontend Service %s: %s after %s", svcName, last, wait)
	}
	return url, err
}

// serviceAddress is http://ClusterIP:port of the Service (its first port): kube-proxy forwards it
// to a Ready pod, no cluster DNS needed.
func serviceAddress(svc *corev1.Service) (string, error) {
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		return "", fmt.Errorf("frontend Service %s has no ClusterIP and port (clusterIP %q, %d ports): set kubernetes.dynamo_target pod", svc.Name, ip, len(svc.Spec.Ports))
	}
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(int(svc.Spec.Ports[0].Port))), nil
}

// frontendAddress is http://podIP:port of the first Ready pod, port being the Service's first
// target port (a name is looked up among the pod's container ports); "" when no pod is Ready.
func frontendAddress(svc *corev1.Service, pods []corev1.Pod) string {
	for i := range pods {
		p := &pods[i]
		if !podReady(p) || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		port := int32(EnginePort)
		if len(svc.Spec.Ports) > 0 {
			sp := svc.Spec.Ports[0]
			port = sp.Port
			switch tp := sp.TargetPort; {
			case tp.Type == intstr.Int && tp.IntVal > 0:
				port = tp.IntVal
			case tp.Type == intstr.String && tp.StrVal != "":
				for _, c := range p.Spec.Containers {
					for _, cp := range c.Ports {
						if cp.Name == tp.StrVal {
							port = cp.ContainerPort
						}
					}
				}
			}
		}
		return "http://" + p.Status.PodIP + ":" + strconv.Itoa(int(port))
	}
	return ""
}

// deleteDynamo deletes the deployment and waits until the API no longer has it (its pods and
// GPUs go with it through the operator's owner references).
func (h *nodeHost) deleteDynamo(ctx context.Context, name string) {
	r := h.r
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res := r.cl.Dynamic.Resource(DynamoGVR).Namespace(r.podNS())
	fg := metav1.DeletePropagationForeground
	if err := res.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
		h.say("deleting DynamoGraphDeployment %s: %v (the namespace goes at the end)", name, err)
		return
	}
	if over, _ := pollUntil(ctx, func() (bool, error) {
		_, err := res.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); !over {
		r.man.Deleted(fleet.Object{Kind: "DynamoGraphDeployment", Namespace: r.podNS(), Name: name, Host: h.node.Name})
	}
}

// dynamoBackend serves the node through one DynamoGraphDeployment per model over its GPUs: one
// slot, one endpoint (the frontend), loaded at load.concurrency × GPUs (aicr's per-GPU concurrency).
type dynamoBackend struct{ *nodePipeline }

// Group makes the node's GPUs one slot: the deployment's workers (one per tp GPUs) share a frontend.
func (d dynamoBackend) Group(gpus []results.GPUInfo, tp int) ([]pipeline.Slot, string) {
	slots, note := pipeline.TPSlots(gpus, tp)
	if len(slots) == 0 {
		return nil, note
	}
	one := pipeline.Slot{Index: 0, GPUName: slots[0].GPUName, NUMANode: -1}
	for _, s := range slots {
		one.GPUs = append(one.GPUs, s.GPUs...)
	}
	return []pipeline.Slot{one}, note
}

// Serve creates the model's DynamoGraphDeployment and waits until it is ready and a completion Job
// on the node got a real completion through its frontend. Stop deletes it.
func (d dynamoBackend) Serve(ctx context.Context, slot pipeline.Slot, model string, cfg config.Config, _ string) (*pipeline.Served, error) {
	h := d.h
	r := h.r
	tp := max(1, cfg.Engine.TP)
	workers := len(slot.GPUs) / tp
	img := cmp.Or(r.opt.EngineImage, DynamoImage)
	idx, mi := strconv.Itoa(h.index), strconv.Itoa(r.modelIndex(model))
	name := r.podName("dgd", idx, mi)
	sv := &pipeline.Served{Engine: results.EngineInfo{Kind: "dynamo-vllm", TP: tp,
		Command: fmt.Sprintf("DynamoGraphDeployment %s: %s + %d × %s (%s)", name, DynamoFrontend, workers, DynamoWorker, img)}}
	obj := dynamoGraph(r.opt.RunID, DynamoSpec{Name: name, Node: h.node.Name, Image: img, Model: model, Workers: workers, TP: tp,
		ExtraArgs: cfg.Engine.ExtraArgs, Env: cfg.Engine.Env, CachePVC: h.pvc, TokenSecret: r.tokenSecret(), Tolerations: r.opt.Selection.Tolerations})
	if err := r.man.Record(fleet.Object{Kind: "DynamoGraphDeployment", Namespace: r.podNS(), Name: name, Host: h.node.Name}); err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := r.cl.Dynamic.Resource(DynamoGVR).Namespace(r.podNS()).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating DynamoGraphDeployment %s: %w", name, err)
	}
	sv.Stop = func() { h.deleteDynamo(context.WithoutCancel(ctx), name) }
	h.say("%s: DynamoGraphDeployment %s (%d worker(s), %s), waiting for Ready", model, name, workers, img)
	if err := h.waitDynamo(ctx, name, cfg.Engine.ReadyTimeout.D()); err != nil {
		return sv, fmt.Errorf("engines not ready: %w", err)
	}
	url, err := h.frontendURL(ctx, name, 2*time.Minute)
	if err != nil {
		return sv, fmt.Errorf("engines not ready: %w", err)
	}
	fails, err := h.checkCompletions(ctx, dnsName("ready", idx, mi), model, []string{url})
	if err != nil {
		return sv, fmt.Errorf("DynamoGraphDeployment %s Ready, but the completion check did not run: %w", name, err)
	}
	if fails[0] != "" {
		return sv, fmt.Errorf("DynamoGraphDeployment %s frontend %s: %s", name, url, fails[0])
	}
	n := len(slot.GPUs)
	load, what := dnsName("load", idx, mi), "DynamoGraphDeployment "+name+" frontend"
	sv.URL, sv.Provision, sv.Binding = url, time.Since(start), loadBinding(what, load, h.node.Name)
	plan, err := r.frontendPlan(cfg, n)
	if err != nil {
		return sv, err
	}
	d.remember(url, &nodeServed{job: load, what: what, plan: plan, profile: cfg.LoadConfig()}) // the Job's plan scales its concurrency × n
	h.say("%s: DynamoGraphDeployment %s Ready and its frontend %s returned a real completion, in %.1fs; load", model, name, url, sv.Provision.Seconds())
	return sv, nil
}

// frontendPlan is the load Job's plan for a frontend over gpus GPUs: the node's load plan
// (loadPlan) at their summed concurrency.
func (r *Run) frontendPlan(cfg config.Config, gpus int) (string, error) {
	cfg.Load.Concurrency, cfg.Load.MaxConcurrency = cfg.Load.Concurrency*gpus, cfg.Load.MaxConcurrency*gpus
	return r.loadPlan(cfg)
}
