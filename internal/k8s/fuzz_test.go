package k8s

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzParseTolerations: any --tolerations value (kubernetes.tolerations) is read or refused with
// a message naming the flag, never half-read: every toleration read has a valid operator and effect,
// and a key unless it is the "*" that tolerates everything.
func FuzzParseTolerations(f *testing.F) {
	for _, s := range []string{"", "*", "nvidia.com/gpu", "a=b:NoSchedule,c:NoExecute", "dedicated=gpu:PreferNoSchedule", "=x", "a:Sometimes", ",,", "a=b=c:NoSchedule:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tols, err := ParseTolerations(s)
		if err != nil {
			if !strings.Contains(err.Error(), "--tolerations") {
				t.Fatalf("error does not name the flag: %v", err)
			}
			return
		}
		for _, tol := range tols {
			switch tol.Operator {
			case corev1.TolerationOpExists:
				if tol.Value != "" {
					t.Fatalf("Exists with a value: %+v", tol)
				}
			case corev1.TolerationOpEqual:
				if tol.Key == "" {
					t.Fatalf("Equal without a key: %+v", tol)
				}
			default:
				t.Fatalf("operator %q", tol.Operator)
			}
			switch tol.Effect {
			case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			default:
				t.Fatalf("effect %q", tol.Effect)
			}
		}
	})
}

// FuzzDynamoReady: any DynamoGraphDeployment the API server returns (an operator's status can be
// anything) is judged without panic, and ready only in state "successful" with nothing waiting.
func FuzzDynamoReady(f *testing.F) {
	g := dynamoGraph("r1", DynamoSpec{Name: "d", Node: "n", Image: "i", Model: "m", Workers: 2, TP: 1})
	ready := g.DeepCopy()
	unstructured.SetNestedField(ready.Object, "successful", "status", "state")
	unstructured.SetNestedField(ready.Object, map[string]any{
		DynamoFrontend: map[string]any{"readyReplicas": int64(1)}, DynamoWorker: map[string]any{"readyReplicas": int64(2)}}, "status", "components")
	for _, o := range []*unstructured.Unstructured{g, ready} {
		b, err := o.MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"apiVersion":"nvidia.com/v1beta1","kind":"DynamoGraphDeployment","spec":{"components":[{"name":"x","replicas":"2"},7]},"status":{"state":"successful","components":{"x":{"readyReplicas":1.5}}}}`))
	f.Add([]byte(`{"apiVersion":"nvidia.com/v1beta1","kind":"DynamoGraphDeployment","spec":{"components":[7]},"status":{"state":"successful"}}`)) // was ready
	f.Fuzz(func(t *testing.T, b []byte) {
		var o unstructured.Unstructured
		if err := o.UnmarshalJSON(b); err != nil {
			return
		}
		ok, why := dynamoReady(&o)
		state, _, _ := unstructured.NestedString(o.Object, "status", "state")
		if ok && (state != "successful" || why != "") {
			t.Fatalf("ready in state %q, waiting %q", state, why)
		}
		if !ok && why == "" {
			t.Fatalf("not ready without a reason: %s", b)
		}
		if ok { // ready needs at least one named component with its replicas ready
			comps, _, _ := unstructured.NestedSlice(o.Object, "spec", "components")
			named := false
			for _, c := range comps {
				if cm, isMap := c.(map[string]any); isMap {
					n, _, _ := unstructured.NestedString(cm, "name")
					named = named || n != ""
				}
			}
			if !named {
				t.Fatalf("ready with no named component: %s", b)
			}
		}
	})
}
