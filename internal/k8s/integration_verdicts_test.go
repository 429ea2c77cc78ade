package k8s_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The user's own marks that every verdict test puts on the nodes and checks are kept: a label, an
// annotation and a PreferNoSchedule taint (which node choice ignores). (A taint under gpuvet's key
// with another effect, which is not gpuvet's either, is in the unit test.)
var userTaint = corev1.Taint{Key: "example.com/maintenance", Value: "soon", Effect: corev1.TaintEffectPreferNoSchedule}

// markNodes puts the user's marks on nodes and, when the test ends, takes off everything the test
// and gpuvet put there (a NoSchedule taint left behind would keep other tests' runs off the node).
func markNodes(t *testing.T, cs kubernetes.Interface, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		setNode(t, cs, n, func(no *corev1.Node) {
			no.Labels["example.com/team"] = "inference"
			if no.Annotations == nil {
				no.Annotations = map[string]string{}
			}
			no.Annotations["example.com/owner"] = "ops"
			no.Spec.Taints = append(withoutKeys(no.Spec.Taints, userTaint.Key, k8s.TaintUnhealthy), userTaint)
		})
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			setNode(t, cs, n, func(no *corev1.Node) {
				for _, k := range []string{"example.com/team", k8s.LabelStatus, k8s.LabelVettedBy} {
					delete(no.Labels, k)
				}
				for _, k := range []string{"example.com/owner", k8s.AnnotationVettedAt, k8s.AnnotationUnhealthyReason,
					k8s.AnnotationValidUntil, k8s.AnnotationPendingReason, k8s.AnnotationPendingAttempts} {
					delete(no.Annotations, k)
				}
				// `clean --untaint` leaves the pending taint in the quarantine's place (the gate).
				no.Spec.Taints = withoutKeys(no.Spec.Taints, userTaint.Key, k8s.TaintUnhealthy, k8s.TaintPending)
			})
		}
	})
}

func withoutKeys(ts []corev1.Taint, keys ...string) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range ts {
		keep := true
		for _, k := range keys {
			keep = keep && t.Key != k
		}
		if keep {
			out = append(out, t)
		}
	}
	return out
}

// setNode edits a node (labels, annotations, taints) through an update that retries on conflict.
func setNode(t *testing.T, cs kubernetes.Interface, name string, edit func(*corev1.Node)) {
	t.Helper()
	ctx := context.Background()
	for try := 0; ; try++ {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		edit(n)
		if _, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err == nil {
			return
		} else if try > 5 {
			t.Fatalf("updating node %s: %v", name, err)
		}
	}
}

func getNode(t *testing.T, cs kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// gpuvetTaint is the node's quarantine taint from gpuvet (NoSchedule), nil when none.
func gpuvetTaint(n *corev1.Node) *corev1.Taint {
	var found *corev1.Taint
	for i, t := range n.Spec.Taints {
		if t.Key == k8s.TaintUnhealthy && t.Effect == corev1.TaintEffectNoSchedule {
			if found != nil {
				return &corev1.Taint{Key: "two gpuvet taints"}
			}
			found = &n.Spec.Taints[i]
		}
	}
	return found
}

// userMarksKept fails unless the node still carries what markNodes put there.
func userMarksKept(t *testing.T, n *corev1.Node) {
	t.Helper()
	if n.Labels["example.com/team"] != "inference" || n.Annotations["example.com/owner"] != "ops" {
		t.Errorf("node %s: the user's label or annotation is gone: %v %v", n.Name, n.Labels, n.Annotations)
	}
	var kept int
	for _, tn := range n.Spec.Taints {
		if tn.MatchTaint(&userTaint) && tn.Value == userTaint.Value {
			kept++
		}
	}
	if kept != 1 {
		t.Errorf("node %s: the user's taints changed: %v", n.Name, n.Spec.Taints)
	}
}

// checkVerdicts checks that every vetted node carries its judged status from summary.json, the run
// id and the time; that the failed ones (and only they) carry gpuvet's taint of this run with the
// reason; and that the user's marks stay.
func checkVerdicts(t *testing.T, cs kubernetes.Interface, s *results.Summary) {
	t.Helper()
	for _, h := range s.Hosts {
		n := getNode(t, cs, h.Name)
		userMarksKept(t, n)
		if n.Labels[k8s.LabelStatus] != string(h.Status) || n.Labels[k8s.LabelVettedBy] != s.RunID || n.Annotations[k8s.AnnotationVettedAt] == "" {
			t.Errorf("node %s: labels %v, annotation %q: want status %s of run %s", h.Name, n.Labels, n.Annotations[k8s.AnnotationVettedAt], h.Status, s.RunID)
		}
		tn := gpuvetTaint(n)
		if h.Status == results.StatusFailed {
			if tn == nil || tn.Value != s.RunID || !strings.Contains(n.Annotations[k8s.AnnotationUnhealthyReason], "run "+s.RunID) {
				t.Errorf("failed node %s: taint %v, reason %q", h.Name, tn, n.Annotations[k8s.AnnotationUnhealthyReason])
			}
		} else if tn != nil {
			t.Errorf("node %s (%s) tainted %v", h.Name, h.Status, tn)
		}
	}
}

func statusOf(s *results.Summary, host string) results.Status {
	for _, h := range s.Hosts {
		if h.Name == host {
			return h.Status
		}
	}
	return "absent"
}

// --label-nodes and --taint-failed on the kwok cluster: the labels are each node's judged status
// (summary.json's), the failed node is quarantined, the next run still vets it (gpuvet tolerates
// its own taint) and takes the taint over, and `gpuvet clean --untaint --run ID` lifts only that
// run's taint and nothing of the user's.
func TestKubernetesLabelTaintUntaint(t *testing.T) {
	e := setup(t)
	// kwok-gpu-1's GPU 0 computes wrong answers: evidence about a GPU, which a taint acts on (an
	// engine that fails every completion fails the node on the engine layer and taints nothing).
	e.standIn(t, func(k *standInKubelet) { k.badGPU = "kwok-gpu-1" })
	markNodes(t, e.cs, "kwok-gpu-0", "kwok-gpu-1")
	state := t.TempDir()
	run := func() *results.Summary {
		out := t.TempDir()
		log, code := e.gpuvetEnv(t, state, []string{"GPUVET_MODEL_CACHE=off"},
			// Health on, one simulated GPU a node: the stand-in corrupts kwok-gpu-1's.
			e.runArgs(out, append([]string{"--label-nodes", "--taint-failed", "--gpu-count", "1", "--health-args", "--sim --sim-count 1 --dcgm=false"}, syncLoad...)...)...)
		if code != 1 {
			t.Fatalf("exit %d, want 1 (a node failed):\n%s", code, log)
		}
		s, err := results.Read(filepath.Join(out, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		if statusOf(s, "kwok-gpu-1") != results.StatusFailed || len(s.Hosts) != 2 || (s.Fleet != nil && len(s.Fleet.Skipped) != 0) {
			t.Fatalf("hosts %d, kwok-gpu-1 %s, skipped %v:\n%s", len(s.Hosts), statusOf(s, "kwok-gpu-1"), s.Fleet, log)
		}
		if !strings.Contains(log, "node kwok-gpu-1: labelled gpuvet.io/status=failed gpuvet.io/run="+s.RunID+" gpuvet.io/action=drain-rma; tainted gpuvet.io/unhealthy="+s.RunID+":NoSchedule") {
			t.Errorf("the run does not say what it wrote onto kwok-gpu-1:\n%s", log)
		}
		checkVerdicts(t, e.cs, s)
		return s
	}
	first := run()
	// The quarantined node is chosen again (not skipped as untolerated), vetted, and re-tainted by the second run.
	second := run()
	if first.RunID == second.RunID {
		t.Fatal("one run id twice")
	}
	log, code := e.gpuvet(t, state, "clean", "--kubeconfig", e.kubeconfig, "--untaint", "--run", first.RunID)
	if code != 0 || !strings.Contains(log, "no gpuvet.io/unhealthy taint to lift") {
		t.Errorf("clean --untaint --run FIRST (the taint is the second run's now): exit %d:\n%s", code, log)
	}
	if tn := gpuvetTaint(getNode(t, e.cs, "kwok-gpu-1")); tn == nil || tn.Value != second.RunID {
		t.Fatalf("clean --untaint --run %s lifted another run's taint: %v", first.RunID, tn)
	}
	log, code = e.gpuvet(t, state, "clean", "--kubeconfig", e.kubeconfig, "--untaint", "--run", second.RunID)
	if code != 0 || !strings.Contains(log, "node kwok-gpu-1: lifted taint gpuvet.io/unhealthy="+second.RunID+":NoSchedule") {
		t.Errorf("clean --untaint --run SECOND: exit %d:\n%s", code, log)
	}
	for _, name := range []string{"kwok-gpu-0", "kwok-gpu-1"} {
		n := getNode(t, e.cs, name)
		userMarksKept(t, n)
		if tn := gpuvetTaint(n); tn != nil || n.Annotations[k8s.AnnotationUnhealthyReason] != "" {
			t.Errorf("node %s after untaint: taint %v, reason %q", name, tn, n.Annotations[k8s.AnnotationUnhealthyReason])
		}
		if n.Labels[k8s.LabelStatus] != string(statusOf(second, name)) || n.Labels[k8s.LabelVettedBy] != second.RunID {
			t.Errorf("node %s: untaint took the status labels too: %v", name, n.Labels)
		}
	}
	e.assertNothingLeft(t, state)
}

// A user allowed everything a run needs but patching nodes: --label-nodes and --taint-failed stop
// the run before anything is created (exit 2) naming the permission and the setting, and so does
// `gpuvet clean --untaint`; a plain run needs no node permission beyond list.
func TestKubernetesVerdictRBAC(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gpuvet-test-no-node-patch"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"", "batch", "storage.k8s.io"}, Resources: []string{"pods", "pods/log", "jobs", "persistentvolumeclaims", "secrets", "storageclasses", "events"}, Verbs: []string{"*"}},
	}}
	bind := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "gpuvet-no-node-patch"}}}
	if _, err := e.cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer e.cs.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	if _, err := e.cs.RbacV1().ClusterRoleBindings().Create(ctx, bind, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer e.cs.RbacV1().ClusterRoleBindings().Delete(ctx, bind.Name, metav1.DeleteOptions{})
	raw, err := clientcmd.LoadFromFile(e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range raw.AuthInfos {
		u.Impersonate = "gpuvet-no-node-patch"
	}
	kc := filepath.Join(t.TempDir(), "limited.kubeconfig")
	if err := clientcmd.WriteToFile(*raw, kc); err != nil {
		t.Fatal(err)
	}
	lim := *e
	lim.kubeconfig = kc
	state := t.TempDir()
	for flag, want := range map[string]string{
		"--label-nodes":   "--label-nodes (kubernetes.label_nodes): missing RBAC permission: patch nodes (cluster-wide)",
		"--taint-failed":  "--taint-failed (kubernetes.taint_failed): missing RBAC permission: patch nodes (cluster-wide)",
		"--taint-flagged": "--taint-flagged (kubernetes.taint_flagged): missing RBAC permission: patch nodes (cluster-wide)",
	} {
		log, code := lim.gpuvet(t, state, lim.runArgs(t.TempDir(), flag)...)
		if code != 2 || !strings.Contains(log, want) || !strings.Contains(log, "nothing was created") {
			t.Errorf("%s: exit %d, want 2 naming the permission:\n%s", flag, code, log)
		}
	}
	log, code := lim.gpuvet(t, state, "clean", "--kubeconfig", kc, "--untaint")
	if code != 2 || !strings.Contains(log, "--untaint: missing RBAC permission: patch nodes (cluster-wide)") {
		t.Errorf("clean --untaint: exit %d, want 2:\n%s", code, log)
	}
	e.assertNothingLeft(t, state)
}
