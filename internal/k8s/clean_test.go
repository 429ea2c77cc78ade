package k8s

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Issue 31: every label, annotation and taint key of gpuvet's own is under the one domain gpuvet.io/
// (its objects' labels were gpuvet.dev/, its nodes' gpuvet.io/).
func TestOneLabelDomain(t *testing.T) {
	keys := []string{LabelRun, LabelRole, LabelNode, LabelModel, LabelSlot, LabelCache,
		LabelStatus, LabelVettedBy, AnnotationVettedAt, TaintUnhealthy, AnnotationUnhealthyReason}
	for k := range runLabels("r1", RoleEngine, "node-a") {
		keys = append(keys, k)
	}
	for k := range cacheLabels("node-a") {
		keys = append(keys, k)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "gpuvet.io/") && !strings.HasPrefix(k, "app.kubernetes.io/") {
			t.Errorf("label key %s: want gpuvet.io/ (or the well-known app.kubernetes.io/)", k)
		}
	}
}

// Issue 31: `gpuvet clean --run ID` finds by its labels what a run left, this version's
// (gpuvet.io/run-id, gpuvet.io/model-cache) and an older gpuvet's (gpuvet.dev/…): the run's
// namespace, its pods in the kept cache's namespace, and with --cache that namespace; another
// run's namespace stays.
func TestCleanFindsThisAndAnOlderVersionsLeftovers(t *testing.T) {
	older := map[string]string{LabelManagedBy: ManagedBy, "gpuvet.dev/run-id": "old-run"}
	for _, tt := range []struct {
		name, runID    string
		runNS, cacheNS map[string]string // labels of the run's namespace and of the kept cache's
		pod            map[string]string // labels of the run's pod in the cache namespace
	}{
		{"this version", "new-run", runLabels("new-run", "", ""), cacheLabels(""), runLabels("new-run", RoleCache, "node-a")},
		{"an older gpuvet", "old-run", older, map[string]string{LabelPartOf: ManagedBy, "gpuvet.dev/model-cache": "true"},
			map[string]string{LabelManagedBy: ManagedBy, "gpuvet.dev/run-id": "old-run", "gpuvet.dev/role": "cache"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpuvet-" + tt.runID, Labels: tt.runNS}},
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpuvet-other", Labels: runLabels("other-run", "", "")}},
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpuvet-cache", Labels: tt.cacheNS}},
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "populate", Namespace: "gpuvet-cache", Labels: tt.pod}},
			)
			// The fake's tracker has no delete-collection: delete the pods the selector selects.
			cs.PrependReactor("delete-collection", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetResource().Resource != "pods" {
					return true, nil, nil
				}
				sel := a.(k8stesting.DeleteCollectionAction).GetListRestrictions().Labels
				podsGVR := corev1.SchemeGroupVersion.WithResource("pods")
				l, err := cs.Tracker().List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace()) // not cs: a reactor runs under its lock
				if err != nil {
					return true, nil, err
				}
				for _, p := range l.(*corev1.PodList).Items {
					if sel.Matches(labels.Set(p.Labels)) {
						if err := cs.Tracker().Delete(podsGVR, p.Namespace, p.Name); err != nil {
							return true, nil, err
						}
					}
				}
				return true, nil, nil
			})
			done, err := Clean(context.Background(), &Cluster{Client: cs}, tt.runID, true, 10*time.Second, "")
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"namespace gpuvet-" + tt.runID, "cache namespace gpuvet-cache (its PVCs with it)"}
			if !slices.Equal(done, want) {
				t.Errorf("cleaned %q, want %q", done, want)
			}
			if _, err := cs.CoreV1().Pods("gpuvet-cache").Get(context.Background(), "populate", metav1.GetOptions{}); err == nil {
				t.Error("the run's pod in the cache namespace is still there")
			}
			if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "gpuvet-other", metav1.GetOptions{}); err != nil {
				t.Errorf("another run's namespace: %v", err)
			}
		})
	}
}

// TestCleanReachesAnExistingCacheNamespace: with kubernetes.cache_namespace_allow_existing the kept
// cache lives in a namespace gpuvet did not create (no cache label): `gpuvet clean` of a killed run
// must still delete the run's pods and hub-token Secret there (found by the run's labels), and
// leave everything else, the namespace itself included, even with --cache.
func TestCleanReachesAnExistingCacheNamespace(t *testing.T) {
	own := runLabels("r1", RoleCache, "node-a")
	cs := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml-team"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "populate", Namespace: "ml-team", Labels: own}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tokenSecret("r1"), Namespace: "ml-team", Labels: runLabels("r1", "", "")}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: "ml-team", Labels: map[string]string{"app": "x"}}},
	)
	cs.PrependReactor("delete-collection", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel := a.(k8stesting.DeleteCollectionAction).GetListRestrictions().Labels
		gvr := a.GetResource()
		var kind string
		switch gvr.Resource {
		case "pods":
			kind = "Pod"
		case "secrets":
			kind = "Secret"
		default:
			return true, nil, nil
		}
		l, err := cs.Tracker().List(gvr, corev1.SchemeGroupVersion.WithKind(kind), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		items, _ := meta.ExtractList(l)
		for _, o := range items {
			m, _ := meta.Accessor(o)
			if sel.Matches(labels.Set(m.GetLabels())) {
				if err := cs.Tracker().Delete(gvr, m.GetNamespace(), m.GetName()); err != nil {
					return true, nil, err
				}
			}
		}
		return true, nil, nil
	})
	ctx := context.Background()
	if _, err := Clean(ctx, &Cluster{Client: cs}, "r1", true, 10*time.Second, "ml-team"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("ml-team").Get(ctx, "populate", metav1.GetOptions{}); err == nil {
		t.Error("the run's pod in the existing cache namespace is still there")
	}
	if _, err := cs.CoreV1().Secrets("ml-team").Get(ctx, tokenSecret("r1"), metav1.GetOptions{}); err == nil {
		t.Error("the run's hub-token Secret in the existing cache namespace is still there")
	}
	if _, err := cs.CoreV1().Pods("ml-team").Get(ctx, "theirs", metav1.GetOptions{}); err != nil {
		t.Errorf("a pod gpuvet did not make: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "ml-team", metav1.GetOptions{}); err != nil {
		t.Errorf("the namespace gpuvet did not create: %v", err)
	}
}
