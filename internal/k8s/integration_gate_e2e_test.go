package k8s_test

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/results"
)

func pendingOn(t *testing.T, cs kubernetes.Interface, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		setNode(t, cs, n, func(no *corev1.Node) {
			no.Spec.Taints = append(withoutKeys(no.Spec.Taints, k8s.TaintPending), corev1.Taint{Key: k8s.TaintPending, Effect: corev1.TaintEffectNoSchedule})
			delete(no.Annotations, k8s.AnnotationPendingAttempts)
		})
	}
}

func hasPending(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == k8s.TaintPending && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

func vetted(n *corev1.Node) *corev1.NodeCondition {
	for i, c := range n.Status.Conditions {
		if c.Type == k8s.ConditionVetted {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// Issue 46 end to end on the kwok cluster, both nodes joining pending (gpuvet's pods tolerate the
// taint; nothing else does): a dry run vets them and changes nothing on them; the run with --gate
// quarantines the straggler (condition False, its node-to-node reason) and releases the other
// when it is ok (or keeps it pending when its figures could not decide); --acceptance exits 1 for
// the flagged fleet. A run whose gates cannot decide keeps both pending and exits 3.
func TestKubernetesGate(t *testing.T) {
	e := setup(t)
	e.standIn(t, func(k *standInKubelet) { k.straggler = "kwok-gpu-1" })
	markNodes(t, e.cs, "kwok-gpu-0", "kwok-gpu-1")
	t.Cleanup(func() { // the condition too, so a later run of this test starts clean
		for _, name := range []string{"kwok-gpu-0", "kwok-gpu-1"} {
			n := getNode(t, e.cs, name)
			n.Status.Conditions = slices.DeleteFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == k8s.ConditionVetted })
			if _, err := e.cs.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
				t.Errorf("node %s: %v", name, err)
			}
		}
	})
	pendingOn(t, e.cs, "kwok-gpu-0", "kwok-gpu-1")
	state := t.TempDir()
	run := func(want int, extra ...string) (*results.Summary, string) {
		t.Helper()
		for try := 1; ; try++ {
			out := t.TempDir()
			// One GPU a node, no health phase (small): the gate acts on the judged node, whatever it ran.
			args := e.runArgs(out, append(append([]string{"--parallel-gpus", "1", "--gate", "--label-nodes", "--max-unhealthy", "100%", "--acceptance"}, small...), extra...)...)
			log, code := e.gpuvetEnv(t, state, []string{"GPUVET_MODEL_CACHE=off"}, args...)
			s, err := results.Read(filepath.Join(out, "summary.json"))
			// A load generator that fell behind its schedule on this busy 2-core machine (ci32, ci35:
			// both nodes client-limited) rightly decides nothing, and the run exits 3: that is the
			// machine, not the gate under test. Up to three tries; the node goes back to pending first.
			if err == nil && code == 3 && want != 3 && try < 3 && anyClientLimited(s) {
				t.Logf("try %d: exit 3, the load generator was client-limited: again", try)
				if !slices.Contains(extra, "--dry-run") {
					pendingOn(t, e.cs, "kwok-gpu-0", "kwok-gpu-1")
				}
				continue
			}
			if err != nil || code != want || len(s.Hosts) != 2 {
				t.Fatalf("exit %d (want %d), summary %v:\n%s", code, want, err, log)
			}
			return s, log
		}
	}
	// The straggler figures as in TestKubernetesRunTwoNodesFlagsStraggler.
	straggle := []string{"--set", "compare.min_samples=3"}

	// A GPUVetted condition an earlier run wrote (another test, or a run before on the same
	// control plane) may be there: the dry run must leave it as it was.
	before := map[string]*corev1.NodeCondition{}
	for _, name := range []string{"kwok-gpu-0", "kwok-gpu-1"} {
		before[name] = vetted(getNode(t, e.cs, name))
	}
	s, log := run(1, append(straggle, "--dry-run")...)
	for _, name := range []string{"kwok-gpu-0", "kwok-gpu-1"} {
		n := getNode(t, e.cs, name)
		if !hasPending(n) || gpuvetTaint(n) != nil || !reflect.DeepEqual(vetted(n), before[name]) || n.Labels[k8s.LabelStatus] != "" || n.Annotations[k8s.AnnotationValidUntil] != "" {
			t.Errorf("node %s changed in a dry run: taints %v labels %v condition %v (was %v)", name, n.Spec.Taints, n.Labels, vetted(n), before[name])
		}
	}
	if statusOf(s, "kwok-gpu-1") != results.StatusFlag || !strings.Contains(log, "node kwok-gpu-1: dry run: would have ") {
		t.Fatalf("dry run: kwok-gpu-1 %s:\n%s", statusOf(s, "kwok-gpu-1"), log)
	}

	s, log = run(1, straggle...)
	if statusOf(s, "kwok-gpu-1") != results.StatusFlag {
		t.Fatalf("kwok-gpu-1 %s, want flag:\n%s", statusOf(s, "kwok-gpu-1"), log)
	}
	n := getNode(t, e.cs, "kwok-gpu-1")
	userMarksKept(t, n)
	c := vetted(n)
	if hasPending(n) || gpuvetTaint(n) == nil || c == nil || c.Status != corev1.ConditionFalse || c.Reason != "Flagged" || !strings.Contains(c.Message, "compare.node_to_node") {
		t.Errorf("the straggler: taints %v condition %+v\n%s", n.Spec.Taints, c, log)
	}
	n = getNode(t, e.cs, "kwok-gpu-0")
	switch st := statusOf(s, "kwok-gpu-0"); st {
	case results.StatusOK:
		if hasPending(n) || vetted(n) == nil || vetted(n).Status != corev1.ConditionTrue || n.Annotations[k8s.AnnotationValidUntil] == "" {
			t.Errorf("ok node kwok-gpu-0 not released: taints %v condition %+v", n.Spec.Taints, vetted(n))
		}
	case results.StatusInconclusive:
		if !hasPending(n) || n.Annotations[k8s.AnnotationPendingAttempts] != "1" || vetted(n) == nil || vetted(n).Status != corev1.ConditionUnknown {
			t.Errorf("undecided node kwok-gpu-0 not kept pending: taints %v annotations %v condition %+v", n.Spec.Taints, n.Annotations, vetted(n))
		}
	default:
		t.Errorf("kwok-gpu-0: %s:\n%s", st, log)
	}

	// No gate can decide: both stay pending, and the acceptance contract says undecided (3). The
	// rung cap at load.max_duration: a rung sized by completions would otherwise run its 3 minutes
	// after samples it can never reach.
	pendingOn(t, e.cs, "kwok-gpu-0", "kwok-gpu-1")
	s, log = run(3, "--set", "compare.min_samples=100000", "--set", "load.max_rung_duration=2s", "--taint-failed")
	for _, name := range []string{"kwok-gpu-0", "kwok-gpu-1"} {
		n := getNode(t, e.cs, name)
		if statusOf(s, name) != results.StatusInconclusive || !hasPending(n) || n.Annotations[k8s.AnnotationPendingAttempts] != "1" ||
			!strings.Contains(n.Annotations[k8s.AnnotationPendingReason], "inconclusive") {
			t.Errorf("node %s (%s): taints %v annotations %v\n%s", name, statusOf(s, name), n.Spec.Taints, n.Annotations, log)
		}
	}
	e.assertNothingLeft(t, state)
}

// anyClientLimited says whether the load generator fell behind its schedule on any endpoint.
func anyClientLimited(s *results.Summary) bool {
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, ep := range m.Endpoints {
				if ep.Load != nil && ep.Load.Client.ClientLimited {
					return true
				}
			}
		}
	}
	return false
}
