package k8s

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuvet/gpuvet/internal/config"
)

func withResources(cs *fake.Clientset, gvs ...string) {
	d := cs.Discovery().(*fakediscovery.FakeDiscovery)
	for _, gv := range gvs {
		d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: gv,
			APIResources: []metav1.APIResource{{Name: "dynamographdeployments", Namespaced: true, Kind: "DynamoGraphDeployment"}}})
	}
}

func TestCheckDynamo(t *testing.T) {
	for _, tt := range []struct {
		gvs  []string
		kind string
		err  string
	}{
		{nil, "vllm", "the cluster has no DynamoGraphDeployment CRD (dynamographdeployments.nvidia.com): install NVIDIA Dynamo's platform"},
		{[]string{"nvidia.com/v1alpha1"}, "vllm", "serves only nvidia.com/v1alpha1"},
		{[]string{"nvidia.com/v1alpha1", "nvidia.com/v1beta1"}, "vllm", ""},
		{[]string{"nvidia.com/v1beta1"}, "sglang", "engine.kind is sglang"},
	} {
		cs := fake.NewClientset()
		withResources(cs, tt.gvs...)
		c := &Cluster{Client: cs, Dynamic: dynfake.NewSimpleDynamicClient(runtime.NewScheme())}
		err := c.CheckDynamo(tt.kind)
		if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%v %s: %v, want %q", tt.gvs, tt.kind, err, tt.err)
		}
		if err != nil && !strings.Contains(err.Error(), "kubernetes.dynamo") {
			t.Errorf("%v: error does not name the setting: %v", tt.gvs, err)
		}
	}
}

// Asking for Dynamo on a cluster without its CRD fails in Prepare: nothing is created.
func TestPrepareDynamoWithoutCRD(t *testing.T) {
	cs := fake.NewClientset(gpuNode("a", 8), class("sc", "x", true))
	allowAll(cs)
	_, err := Prepare(context.Background(), &Cluster{Client: cs}, config.Defaults(), Options{RunID: "r", Image: "i", CacheSize: "1Gi", Dynamo: true})
	if err == nil || !strings.Contains(err.Error(), "no DynamoGraphDeployment CRD") {
		t.Fatalf("%v", err)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" {
			t.Errorf("created %s", a.GetResource().Resource)
		}
	}
}

func TestDynamoGraph(t *testing.T) {
	g := dynamoGraph("r1", DynamoSpec{Name: "dgd-0-0", Node: "node-a", Image: "img", Model: "Qwen/Qwen3-8B", Workers: 4, TP: 2,
		CachePVC: "cache", TokenSecret: "gpuvet-hub-token-r1", ExtraArgs: []string{"--enforce-eager"}})
	if g.GetAPIVersion() != "nvidia.com/v1beta1" || g.GetKind() != "DynamoGraphDeployment" || g.GetLabels()[LabelRun] != "r1" {
		t.Fatalf("%s %s %v", g.GetAPIVersion(), g.GetKind(), g.GetLabels())
	}
	comps, _, _ := unstructured.NestedSlice(g.Object, "spec", "components")
	if len(comps) != 2 {
		t.Fatalf("%d components", len(comps))
	}
	w := comps[1].(map[string]any)
	if w["name"] != DynamoWorker || w["replicas"] != int64(4) || w["type"] != "worker" {
		t.Errorf("worker %v %v %v", w["name"], w["replicas"], w["type"])
	}
	c, _, _ := unstructured.NestedSlice(w, "podTemplate", "spec", "containers")
	main := c[0].(map[string]any)
	lim, _, _ := unstructured.NestedString(main, "resources", "limits", "nvidia.com/gpu")
	args, _, _ := unstructured.NestedStringSlice(main, "args")
	if lim != "2" || strings.Join(args, " ") != "--model Qwen/Qwen3-8B --tensor-parallel-size 2 --enforce-eager" {
		t.Errorf("limit %q args %q", lim, args)
	}
	ro, _, _ := unstructured.NestedSlice(w, "podTemplate", "spec", "volumes")
	if len(ro) != 1 || ro[0].(map[string]any)["persistentVolumeClaim"].(map[string]any)["readOnly"] != true {
		t.Errorf("volumes %v", ro)
	}
	b, _ := g.MarshalJSON()
	for _, want := range []string{`"secretKeyRef":{"key":"HF_TOKEN","name":"gpuvet-hub-token-r1"}`, `"HF_HUB_OFFLINE"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("manifest lacks %s:\n%s", want, b)
		}
	}
	if n := strings.Count(string(b), `"matchFields":[{"key":"metadata.name","operator":"In","values":["node-a"]}]`); n != 2 {
		t.Errorf("%d of 2 components pinned to the node", n)
	}
}

func TestDynamoReady(t *testing.T) {
	g := dynamoGraph("r1", DynamoSpec{Name: "d", Node: "n", Image: "i", Model: "m", Workers: 2, TP: 1})
	set := func(state string, front, work int64) *unstructured.Unstructured {
		o := g.DeepCopy()
		unstructured.SetNestedField(o.Object, state, "status", "state")
		unstructured.SetNestedField(o.Object, map[string]any{
			DynamoFrontend: map[string]any{"readyReplicas": front}, DynamoWorker: map[string]any{"readyReplicas": work}}, "status", "components")
		return o
	}
	for _, tt := range []struct {
		o     *unstructured.Unstructured
		ready bool
		why   string
	}{
		{g, false, `state ""`},
		{set("pending", 1, 2), false, `state "pending"`},
		{set("successful", 1, 1), false, "VllmDecodeWorker 1/2 Ready"},
		{set("successful", 0, 2), false, "Frontend 0/1 Ready"},
		{set("successful", 1, 2), true, ""},
	} {
		ok, why := dynamoReady(tt.o)
		if ok != tt.ready || !strings.Contains(why, tt.why) {
			t.Errorf("%v %q, want %v %q", ok, why, tt.ready, tt.why)
		}
	}
}

func TestFrontendAddress(t *testing.T) {
	pod := func(name, ip string, ready bool) corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
			Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	svc := func(tp intstr.IntOrString) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8000, TargetPort: tp}}}}
	}
	for _, tt := range []struct {
		svc  *corev1.Service
		pods []corev1.Pod
		want string
	}{
		{svc(intstr.FromInt32(9000)), []corev1.Pod{pod("a", "10.0.0.1", false), pod("b", "10.0.0.2", true)}, "http://10.0.0.2:9000"},
		{svc(intstr.FromString("http")), []corev1.Pod{pod("a", "10.0.0.1", true)}, "http://10.0.0.1:8080"},
		{svc(intstr.IntOrString{}), []corev1.Pod{pod("a", "10.0.0.1", true)}, "http://10.0.0.1:8000"},
		{svc(intstr.FromInt32(9000)), []corev1.Pod{pod("a", "10.0.0.1", false), pod("b", "", true)}, ""},
	} {
		if got := frontendAddress(tt.svc, tt.pods); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.svc.Spec.Ports[0].TargetPort, got, tt.want)
		}
	}
}
