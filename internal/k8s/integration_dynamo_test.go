package k8s_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/results"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

const dynamoCRD = "dynamographdeployments.nvidia.com"

// installDynamoCRD installs a minimal DynamoGraphDeployment CRD (any spec, a status subresource)
// and removes it at the end; there is no Dynamo operator here, dynamoOperator plays its part.
func (e *env) installDynamoCRD(t *testing.T) {
	ctx := context.Background()
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": dynamoCRD},
		"spec": map[string]any{"group": "nvidia.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "dynamographdeployments", "singular": "dynamographdeployment", "kind": "DynamoGraphDeployment", "shortNames": []any{"dgd"}},
			"versions": []any{map[string]any{"name": "v1beta1", "served": true, "storage": true,
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{"spec": open, "status": open}}},
				"subresources": map[string]any{"status": map[string]any{}}}}},
	}}
	if _, err := e.dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.dyn.Resource(crdGVR).Delete(ctx, dynamoCRD, metav1.DeleteOptions{})
		for i := 0; i < 300; i++ {
			if _, err := e.dyn.Resource(crdGVR).Get(ctx, dynamoCRD, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	for i := 0; i < 300; i++ { // Established, and served through discovery
		l, err := e.cs.Discovery().ServerResourcesForGroupVersion("nvidia.com/v1beta1")
		if err == nil && len(l.APIResources) > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the DynamoGraphDeployment CRD was not served within 30 s")
}

// dynamoOperator plays NVIDIA Dynamo's operator for the test: for each DynamoGraphDeployment it
// makes the frontend Service, one frontend pod (served by the stand-in kubelet with a local
// `gpuvet sim`, Ready when it answers /health) and the worker pods holding their GPUs, all owned
// by the deployment; once they are Ready it reports the deployment successful.
type dynamoOperator struct {
	e *env
	// The images of its pods: "dynamo" for the stand-in kubelet; on the real node gpuvet's image
	// (the frontend runs `gpuvet sim`) and the pause image (the workers hold their GPUs).
	frontImage, workerImage string
	mu                      sync.Mutex
	seen                    map[string]bool // namespace/name of every deployment met
	errs                    []string
}

func (e *env) runDynamoOperator(t *testing.T) *dynamoOperator {
	return e.runDynamoOperatorWith(t, "dynamo", "dynamo")
}

func (e *env) runDynamoOperatorWith(t *testing.T, frontImage, workerImage string) *dynamoOperator {
	o := &dynamoOperator{e: e, seen: map[string]bool{}, frontImage: frontImage, workerImage: workerImage}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			l, err := e.dyn.Resource(k8s.DynamoGVR).Namespace("").List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range l.Items {
					o.reconcile(ctx, &l.Items[i])
				}
			}
			time.Sleep(150 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		for _, e := range o.errs {
			t.Errorf("stand-in Dynamo operator: %s", e)
		}
	})
	return o
}

func (o *dynamoOperator) fail(format string, a ...any) {
	o.mu.Lock()
	o.errs = append(o.errs, fmt.Sprintf(format, a...))
	o.mu.Unlock()
}

func (o *dynamoOperator) reconcile(ctx context.Context, d *unstructured.Unstructured) {
	if d.GetDeletionTimestamp() != nil {
		return
	}
	key := d.GetNamespace() + "/" + d.GetName()
	o.mu.Lock()
	first := !o.seen[key]
	o.seen[key] = true
	o.mu.Unlock()
	ns, name := d.GetNamespace(), d.GetName()
	comps, _, _ := unstructured.NestedSlice(d.Object, "spec", "components")
	if len(comps) != 2 {
		o.fail("%s: %d components", key, len(comps))
		return
	}
	own := []metav1.OwnerReference{{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Name: name, UID: d.GetUID()}}
	sel := func(comp string) map[string]string {
		return map[string]string{k8s.LabelDynamoGraph: name, k8s.LabelDynamoComponent: comp}
	}
	if first {
		node := ""
		workers, _, _ := unstructured.NestedInt64(comps[1].(map[string]any), "replicas")
		terms, _, _ := unstructured.NestedSlice(comps[1].(map[string]any), "podTemplate", "spec", "affinity", "nodeAffinity",
			"requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
		if len(terms) == 1 {
			f, _, _ := unstructured.NestedSlice(terms[0].(map[string]any), "matchFields")
			if v, _, _ := unstructured.NestedStringSlice(f[0].(map[string]any), "values"); len(v) == 1 {
				node = v[0]
			}
		}
		model := d.GetLabels()[k8s.LabelModel]
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name + "-frontend", OwnerReferences: own},
			Spec: corev1.ServiceSpec{Selector: sel(k8s.DynamoFrontend), Ports: []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromInt32(8000)}}}}
		if _, err := o.e.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			o.fail("service: %v", err)
		}
		// The stand-in kubelet runs pods labelled as gpuvet's engines: the frontend is a local sim.
		fl := sel(k8s.DynamoFrontend)
		fl[k8s.LabelManagedBy], fl[k8s.LabelRole], fl[k8s.LabelRun] = k8s.ManagedBy, k8s.RoleEngine, d.GetLabels()[k8s.LabelRun]
		front := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-frontend-0", Labels: fl, OwnerReferences: own},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: o.frontImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:        []string{k8s.GpuvetBinary, "sim", "--gpu", "H200", "--model", strings.ReplaceAll(model, "_", "/"), "--host", "0.0.0.0", "--port", "8000"},
				Ports:          []corev1.ContainerPort{{ContainerPort: 8000}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}}}}}}
		if _, err := o.e.cs.CoreV1().Pods(ns).Create(ctx, front, metav1.CreateOptions{}); err != nil {
			o.fail("frontend pod: %v", err)
		}
		for i := range workers {
			w := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-worker-%d", name, i), Labels: sel(k8s.DynamoWorker), OwnerReferences: own},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: o.workerImage, ImagePullPolicy: corev1.PullIfNotPresent,
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{k8s.GPUResource: resource.MustParse("1")},
						Requests: corev1.ResourceList{k8s.GPUResource: resource.MustParse("1")}}}}}}
			if _, err := o.e.cs.CoreV1().Pods(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
				o.fail("worker pod: %v", err)
			}
		}
	}
	// Status: each component's Ready pods; successful once every desired replica is Ready.
	ready := map[string]int64{}
	pods, err := o.e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelDynamoGraph + "=" + name})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready[p.Labels[k8s.LabelDynamoComponent]]++
			}
		}
	}
	state := "successful"
	st := map[string]any{}
	for _, c := range comps {
		cm := c.(map[string]any)
		n, _ := cm["name"].(string)
		want, _, _ := unstructured.NestedInt64(cm, "replicas")
		st[n] = map[string]any{"replicas": want, "readyReplicas": ready[n]}
		if ready[n] < want {
			state = "pending"
		}
	}
	cur := d.DeepCopy()
	unstructured.SetNestedField(cur.Object, state, "status", "state")
	unstructured.SetNestedField(cur.Object, st, "status", "components")
	o.e.dyn.Resource(k8s.DynamoGVR).Namespace(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
}

// With kubernetes.dynamo and the DynamoGraphDeployment CRD, each node is served through a
// DynamoGraphDeployment: gpuvet waits until the operator reports it ready, checks a real
// completion through its frontend, runs the load against the frontend, and deletes it. Without
// the CRD, asking for Dynamo fails before anything is created.
func TestKubernetesDynamo(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	state := t.TempDir()
	if _, err := e.dyn.Resource(crdGVR).Get(ctx, dynamoCRD, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the test control plane already has the %s CRD (%v)", dynamoCRD, err)
	}
	start := time.Now()
	log, code := e.gpuvet(t, state, e.runArgs(t.TempDir(), "--dynamo", "--engine", "vllm")...)
	if code != 2 || !strings.Contains(log, "no DynamoGraphDeployment CRD (dynamographdeployments.nvidia.com)") || !strings.Contains(log, "kubernetes.dynamo false") {
		t.Errorf("without the CRD: exit %d, want 2 naming the CRD and the setting:\n%s", code, log)
	}
	t.Logf("without the CRD: exit %d in %s", code, time.Since(start).Round(100*time.Millisecond))
	e.assertNothingLeft(t, state)

	e.installDynamoCRD(t)
	op := e.runDynamoOperator(t)
	e.standIn(t, nil)
	out := t.TempDir()
	start = time.Now()
	log, code = e.gpuvet(t, state, e.runArgs(out, append([]string{"--dynamo", "--engine", "vllm", "--gpu-count", "2", "--set", "health.enabled=false"}, syncLoad...)...)...)
	t.Logf("with Dynamo: exit %d in %s", code, time.Since(start).Round(100*time.Millisecond))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, log)
	}
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Hosts) != 2 || len(op.seen) != 2 {
		t.Fatalf("%d hosts, %d DynamoGraphDeployments; want one per node\n%s", len(s.Hosts), len(op.seen), log)
	}
	for _, h := range s.Hosts {
		if h.Error != "" || len(h.Models) != 1 || len(h.Models[0].Endpoints) != 1 {
			t.Fatalf("host %s: error %q, %d models\n%s", h.Name, h.Error, len(h.Models), log)
		}
		m := h.Models[0]
		ep := m.Endpoints[0]
		if m.Engine.Kind != "dynamo-vllm" || ep.Error != "" || ep.Load == nil || len(ep.GPUs) != 2 || !strings.HasPrefix(ep.URL, "http://127.77.") ||
			!strings.Contains(ep.Binding, "DynamoGraphDeployment") {
			t.Errorf("host %s: engine %s, endpoint error %q, GPUs %v, url %s, binding %q", h.Name, m.Engine.Kind, ep.Error, ep.GPUs, ep.URL, ep.Binding)
		}
	}
	if !strings.Contains(log, "returned a real completion") {
		t.Errorf("no completion check in the log:\n%s", log)
	}
	left, err := e.dyn.Resource(k8s.DynamoGVR).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil || len(left.Items) != 0 {
		t.Errorf("DynamoGraphDeployments left: %v %v", left, err)
	}
	e.assertNothingLeft(t, state)
}
