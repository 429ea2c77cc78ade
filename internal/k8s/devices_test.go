package k8s

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

const draDriver = "gpu.nvidia.com"

// DeviceNeeds is what taking a GPU alone asks of the API. A run never checks it (without it the
// node taint is used, and the run says why), so only the shipped ClusterRole's test reads it.
func DeviceNeeds() []Permission {
	const g = "resource.k8s.io"
	out := []Permission{{Verb: "list", Group: g, Resource: "resourceslices"}}
	for _, v := range []string{"create", "get", "update", "list", "delete"} {
		out = append(out, Permission{Verb: v, Group: g, Resource: "devicetaintrules"})
	}
	return out
}

// gpuUUID is GPU i's UUID on node.
func gpuUUID(node string, i int) string { return fmt.Sprintf("GPU-%s-%04d", node, i) }

// gpuSlice is the ResourceSlice a DRA GPU driver publishes for a node of 8 GPUs: devices gpu-0 …
// gpu-7, each with its uuid and index as attributes (as NVIDIA's k8s-dra-driver-gpu names them).
func gpuSlice(node string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu", Labels: map[string]string{"gpuvet-test": "dra"}},
		Spec: resourcev1.ResourceSliceSpec{Driver: draDriver, NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}},
	}
	for i := range 8 {
		uuid, idx := gpuUUID(node, i), int64(i)
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"uuid": {StringValue: &uuid}, "index": {IntValue: &idx}}})
	}
	return s
}

// hostWithBadGPU is node's verdict with gpu bad failed on GPU evidence alone.
func hostWithBadGPU(node string, bad int, layers map[string]results.Status) results.Host {
	h := results.Host{Name: node, Status: results.StatusFailed, HardwareStatus: results.StatusFailed, Layers: layers,
		Action: results.ActionDrainRMA, Error: ""}
	for i := range 8 {
		st := results.StatusOK
		if i == bad {
			st = results.StatusFailed
		}
		h.GPUs = append(h.GPUs, results.GPUVerdict{Index: i, UUID: gpuUUID(node, i), Status: st})
	}
	return h
}

// devicesCase runs the per-GPU quarantine on cs: n1 publishes its GPUs through DRA, n2 does not, n3
// publishes them but also failed on its host layer, n4 publishes devices of which its failed GPU
// (swapped since) is not one. Pending nodes under the gate: n1 loses gpu 3 alone and is released,
// n2, n3 and n4 are quarantined whole, n4 saying why. `clean --untaint` of the run deletes the
// rule; a rule of gpuvet's name that is not gpuvet's is never touched.
func devicesCase(t *testing.T, cs kubernetes.Interface, prefix string) {
	ctx := context.Background()
	n1, n2, n3, n4 := prefix+"n1", prefix+"n2", prefix+"n3", prefix+"n4"
	for _, n := range []string{n1, n2, n3, n4} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, pendingNode(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{n1, n3, n4} {
		if _, err := cs.ResourceV1().ResourceSlices().Create(ctx, gpuSlice(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, n := range []string{n1, n2, n3, n4} {
			_ = cs.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
			_ = cs.ResourceV1().ResourceSlices().Delete(ctx, n+"-gpu", metav1.DeleteOptions{})
			for i := range 8 {
				_ = cs.ResourceV1().DeviceTaintRules().Delete(ctx, deviceRuleName(n, i), metav1.DeleteOptions{})
			}
		}
	})
	gpuOnly := map[string]results.Status{results.LayerGPU: results.StatusFailed}
	s := &results.Summary{RunID: "20261204T200000Z-dra00001", Hosts: []results.Host{
		hostWithBadGPU(n1, 3, gpuOnly), hostWithBadGPU(n2, 5, gpuOnly),
		hostWithBadGPU(n3, 1, map[string]results.Status{results.LayerGPU: results.StatusFailed, results.LayerHost: results.StatusFailed}),
		hostWithBadGPU(n4, 2, gpuOnly),
	}}
	s.Hosts[3].GPUs[2].UUID = "GPU-swapped"
	all, _ := fleet.ParseMaxUnhealthy("100%")
	f := &Fleet{Cluster: &Cluster{Client: cs}, Verdicts: Verdicts{Label: true, TaintFailed: true, Gate: true, MaxUnhealthy: all},
		run: &Run{nodes: []Node{{Name: n1}, {Name: n2}, {Name: n3}, {Name: n4}}}}
	if err := f.ApplyVerdicts(ctx, s); err != nil {
		t.Fatal(err)
	}
	r, err := cs.ResourceV1().DeviceTaintRules().Get(ctx, deviceRuleName(n1, 3), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no DeviceTaintRule for %s gpu 3: %v (actions %+v)", n1, err, s.Fleet)
	}
	sel := r.Spec.DeviceSelector
	if sel == nil || *sel.Driver != draDriver || *sel.Pool != n1 || *sel.Device != "gpu-3" || r.Spec.Taint.Key != TaintUnhealthy ||
		r.Spec.Taint.Value != s.RunID || r.Spec.Taint.Effect != resourcev1.DeviceTaintEffectNoSchedule || r.Labels[LabelRun] != s.RunID ||
		!strings.Contains(r.Annotations[AnnotationDeviceReason], gpuUUID(n1, 3)) {
		t.Errorf("rule %+v", r)
	}
	node1 := node(t, cs, n1)
	if gpuvetTaint(node1.Spec.Taints, "") != nil || hasTaint(node1.Spec.Taints, TaintPending) || node1.Labels[LabelStatus] != "failed" {
		t.Errorf("%s: its GPU taken alone, the node should be released: taints %v labels %v", n1, node1.Spec.Taints, node1.Labels)
	}
	for _, n := range []string{n2, n3, n4} {
		if no := node(t, cs, n); gpuvetTaint(no.Spec.Taints, s.RunID) == nil {
			t.Errorf("%s: not quarantined whole: %v", n, no.Spec.Taints)
		}
		for i := range 8 {
			if _, err := cs.ResourceV1().DeviceTaintRules().Get(ctx, deviceRuleName(n, i), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s gpu %d: a DeviceTaintRule for a node quarantined whole (%v)", n, i, err)
			}
		}
	}
	said := map[string]string{}
	for _, a := range s.Fleet.NodeActions {
		said[a.Node] = strings.Join(a.Did, "; ")
	}
	if !strings.Contains(said[n1], "tainted gpu 3 ("+gpuUUID(n1, 3)+") as DRA device "+draDriver+"/"+n1+"/gpu-3 alone") ||
		!strings.Contains(said[n1], "released") ||
		!strings.HasSuffix(said[n4], "the whole node, not its GPUs alone: gpu 2 (GPU-swapped) is not among its DRA devices") ||
		strings.Contains(said[n2]+said[n3], "DRA") {
		t.Errorf("actions:\n%s: %s\n%s: %s\n%s: %s\n%s: %s", n1, said[n1], n2, said[n2], n3, said[n3], n4, said[n4])
	}

	// A user's rule under gpuvet's name is not replaced, and the node falls back to its own taint.
	user := deviceRule(n1, deviceRef{gpu: 6, driver: draDriver, pool: n1, device: "gpu-6"}, Verdict{RunID: "user", At: time.Now()})
	user.Labels = map[string]string{"team": "ops"}
	if _, err := cs.ResourceV1().DeviceTaintRules().Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s2 := &results.Summary{RunID: "20261204T210000Z-dra00002", Hosts: []results.Host{hostWithBadGPU(n1, 6, gpuOnly)}}
	f.run = &Run{nodes: []Node{{Name: n1}}}
	f.Verdicts = Verdicts{TaintFailed: true, MaxUnhealthy: all}
	if err := f.ApplyVerdicts(ctx, s2); err != nil {
		t.Fatal(err)
	}
	if got, _ := cs.ResourceV1().DeviceTaintRules().Get(ctx, user.Name, metav1.GetOptions{}); got == nil || got.Labels["team"] != "ops" || got.Spec.Taint.Value != "user" {
		t.Errorf("the user's rule changed: %+v", got)
	}
	if no := node(t, cs, n1); gpuvetTaint(no.Spec.Taints, s2.RunID) == nil {
		t.Errorf("%s: the rule could not be written, so the node should carry the taint: %v", n1, no.Spec.Taints)
	}

	// clean --untaint of the first run deletes its rule (and the node taints of it), not the user's.
	done, err := Untaint(ctx, cs, s.RunID)
	if err != nil || !strings.Contains(strings.Join(done, "\n"), "deleted DeviceTaintRule "+deviceRuleName(n1, 3)) {
		t.Fatalf("untaint: %v\n%s", err, strings.Join(done, "\n"))
	}
	if _, err := cs.ResourceV1().DeviceTaintRules().Get(ctx, deviceRuleName(n1, 3), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the run's rule is still there after untaint: %v", err)
	}
	if _, err := cs.ResourceV1().DeviceTaintRules().Get(ctx, user.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("untaint deleted the user's rule: %v", err)
	}
}

func TestGPUsTakenAloneThroughDRA(t *testing.T) {
	devicesCase(t, fake.NewClientset(), "")
}

// On the test control plane (GPUVET_TEST_K8S_KUBECONFIG): the API server itself validates the
// DeviceTaintRules, serves the ResourceSlices by spec.nodeName, and deletes by UID.
func TestGPUsTakenAloneThroughDRAOnTheAPIServer(t *testing.T) {
	devicesCase(t, testControlPlane(t, Limits{QPS: 100, Burst: 200}).Client, "gpuvet-dra-")
}

// testControlPlane connects to the test control plane (GPUVET_TEST_K8S_KUBECONFIG), or skips.
func testControlPlane(t *testing.T, l Limits) *Cluster {
	t.Helper()
	kc := os.Getenv("GPUVET_TEST_K8S_KUBECONFIG")
	if kc == "" {
		t.Skip("no test control plane (GPUVET_TEST_K8S_KUBECONFIG; see integration_test.go)")
	}
	cl, err := ConnectWith(kc, "", l)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
