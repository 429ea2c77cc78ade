package k8s

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// An event wakes the waits on its object and no other: a Job's wait wakes on the Job, on its pods
// (their job-name label) and on the Job controller's events about it; an engine pod's wait on that
// pod. A wake-up that comes while the wait is busy is kept for it.
func TestEventsWakeOnlyTheirWaits(t *testing.T) {
	w := &nsWatch{subs: map[string]map[*subscription]bool{}}
	job, stopJob := w.subscribe("load-1")
	pod, stopPod := w.subscribe("engine-1", "engine-2")
	woke := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	for _, tc := range []struct {
		what     string
		obj      any
		job, pod bool
	}{
		{"the Job", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "load-1"}}, true, false},
		{"the Job's pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "load-1-x7k2p", Labels: map[string]string{jobNameLabel: "load-1"}}}, true, false},
		{"an event about the Job", &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: "load-1"}}, true, false},
		{"an engine pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "engine-2"}}, false, true},
		{"a deleted engine pod", cache.DeletedFinalStateUnknown{Obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "engine-1"}}}, false, true},
		{"another node's Job", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "load-2"}}, false, false},
	} {
		w.signal(tc.obj)
		w.signal(tc.obj) // twice while the wait is busy: one wake-up kept, none blocks
		if j, p := woke(job), woke(pod); j != tc.job || p != tc.pod {
			t.Errorf("%s: the Job's wait woke %v (want %v), the engine pods' wait %v (want %v)", tc.what, j, tc.job, p, tc.pod)
		}
	}
	stopJob()
	stopPod()
	if len(w.subs) != 0 {
		t.Errorf("subscriptions left after their waits ended: %v", w.subs)
	}
}
