package k8s

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// A run waits on many pods and Jobs at once (64 nodes at a time). Each wait reads them from one
// shared informer per namespace (one list, then one watch) instead of polling: a run's requests
// grow with the objects it creates, not with how long its pods take. The informers live while a
// wait uses them, and a little after, for the next wait of the namespace.

// jobNameLabel is the label the Job controller puts on its pods.
const jobNameLabel = "batch.kubernetes.io/job-name"

// lingerAfterUse is how long a namespace's informers stay once no wait uses them.
var lingerAfterUse = 10 * time.Second

// recheckEvery re-reads a wait's objects without an event (a safety net: events drive the waits).
var recheckEvery = 5 * time.Second

type watchKey struct {
	cs kubernetes.Interface
	ns string
}

// nsWatch is one namespace's pod and Job informers, shared by every wait on that namespace.
type nsWatch struct {
	pods, jobs cache.SharedIndexInformer
	stop       chan struct{}
	refs       int
	idle       *time.Timer

	mu   sync.Mutex
	subs map[string]map[*subscription]bool // object name → the waits on it

	// events are the Job controller's FailedCreate events, watched from the first wait that needs
	// them; nil when gpuvet may not list events there (best effort).
	eventsOnce sync.Once
	events     cache.SharedIndexInformer
	// warnings are the Warning events of the namespace's pods, watched from the first pod slow to
	// start (warningsAfter); nil when gpuvet may not list events there (best effort).
	warningsOnce sync.Once
	warnings     cache.SharedIndexInformer
}

var watches = struct {
	sync.Mutex
	m map[watchKey]*nsWatch
}{m: map[watchKey]*nsWatch{}}

// watchNamespace returns ns's shared informers, started if need be, and the function that gives
// them back.
func watchNamespace(cs kubernetes.Interface, ns string) (*nsWatch, func()) {
	key := watchKey{cs, ns}
	watches.Lock()
	defer watches.Unlock()
	w := watches.m[key]
	if w == nil {
		w = newNSWatch(cs, ns)
		watches.m[key] = w
	}
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	w.refs++
	var once sync.Once
	return w, func() { once.Do(func() { release(key, w) }) }
}

func release(key watchKey, w *nsWatch) {
	watches.Lock()
	defer watches.Unlock()
	w.refs--
	if w.refs > 0 {
		return
	}
	w.idle = time.AfterFunc(lingerAfterUse, func() {
		watches.Lock()
		defer watches.Unlock()
		if w.refs == 0 && watches.m[key] == w {
			delete(watches.m, key)
			close(w.stop)
		}
	})
}

func newNSWatch(cs kubernetes.Interface, ns string) *nsWatch {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	w := &nsWatch{pods: f.Core().V1().Pods().Informer(), jobs: f.Batch().V1().Jobs().Informer(),
		stop: make(chan struct{}), subs: map[string]map[*subscription]bool{}}
	_ = w.pods.AddIndexers(cache.Indexers{jobNameLabel: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[jobNameLabel] != "" {
			return []string{p.Labels[jobNameLabel]}, nil
		}
		return nil, nil
	}})
	h := cache.ResourceEventHandlerFuncs{AddFunc: w.signal, UpdateFunc: func(_, o any) { w.signal(o) }, DeleteFunc: w.signal}
	_, _ = w.pods.AddEventHandler(h)
	_, _ = w.jobs.AddEventHandler(h)
	f.Start(w.stop)
	return w
}

// subscription is one wait's wake-up, on the names of the objects it reads: waking every wait of a
// namespace on every event was most of gpuvet's own CPU in a 1,000-node run. The channel is
// buffered, so an event between the wait's reading its objects and its waiting is not lost.
type subscription struct {
	names []string
	c     chan struct{}
}

// subscribe wakes the returned channel at each event on an object named one of names (a Job's pods
// and events count as the Job's); cancel ends it.
func (w *nsWatch) subscribe(names ...string) (<-chan struct{}, func()) {
	sub := &subscription{names: names, c: make(chan struct{}, 1)}
	w.mu.Lock()
	for _, n := range names {
		if w.subs[n] == nil {
			w.subs[n] = map[*subscription]bool{}
		}
		w.subs[n][sub] = true
	}
	w.mu.Unlock()
	return sub.c, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, n := range sub.names {
			delete(w.subs[n], sub)
			if len(w.subs[n]) == 0 {
				delete(w.subs, n)
			}
		}
	}
}

// signal wakes the waits on an event's object (a Job's pod: its Job too; an Event: its object).
func (w *nsWatch) signal(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	var names []string
	switch o := obj.(type) {
	case *corev1.Pod:
		names = []string{o.Name, o.Labels[jobNameLabel]}
	case *batchv1.Job:
		names = []string{o.Name}
	case *corev1.Event:
		names = []string{o.InvolvedObject.Name}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		for sub := range w.subs[n] {
			select {
			case sub.c <- struct{}{}:
			default: // a wake-up is already waiting
			}
		}
	}
}

// synced reports whether both informers hold the namespace's objects.
func (w *nsWatch) synced() bool { return w.pods.HasSynced() && w.jobs.HasSynced() }

// untilSynced is how often a wait looks again before its informers have synced: their first list
// sends no event to a wait that subscribed after it, so sleeping recheckEvery could spend a whole
// short timeout blind.
const untilSynced = 50 * time.Millisecond

// recheck is when a wait looks again without an event: tick, or sooner while unsynced.
func (w *nsWatch) recheck(tick time.Duration) <-chan time.Time {
	if !w.synced() {
		tick = min(tick, untilSynced)
	}
	return time.After(tick)
}

func (w *nsWatch) pod(ns, name string) (*corev1.Pod, bool) {
	return stored[*corev1.Pod](w.pods, ns, name)
}
func (w *nsWatch) job(ns, name string) (*batchv1.Job, bool) {
	return stored[*batchv1.Job](w.jobs, ns, name)
}

// stored is the informer's object ns/name, if it holds one of type T.
func stored[T any](inf cache.SharedIndexInformer, ns, name string) (T, bool) {
	o, _, _ := inf.GetStore().GetByKey(ns + "/" + name)
	t, ok := o.(T)
	return t, ok
}

// jobPods are the Job's pods (the Job controller's label), oldest first.
func (w *nsWatch) jobPods(job string) []*corev1.Pod {
	objs, _ := w.pods.GetIndexer().ByIndex(jobNameLabel, job)
	var out []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b *corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return out
}

// refusedSelector picks the events that say the API refused a Job's pod (admission, a quota).
const refusedSelector = "involvedObject.kind=Job,reason=FailedCreate"

// refused is why the API refused the Job's pod, from the Job controller's FailedCreate event (""
// when none, or gpuvet may not list events). The Job controller keeps trying, so without this the
// Job would wait out its timeout.
func (w *nsWatch) refused(cs kubernetes.Interface, ns, job string) string {
	w.eventsOnce.Do(func() { w.events = w.watchEvents(cs, ns, refusedSelector) })
	if w.events == nil || !w.events.HasSynced() {
		return ""
	}
	for _, o := range w.events.GetStore().List() {
		if e, ok := o.(*corev1.Event); ok && e.Reason == "FailedCreate" && e.InvolvedObject.Kind == "Job" && e.InvolvedObject.Name == job {
			return e.Message
		}
	}
	return ""
}

// warningSelector picks the Warning events of pods: why one does not start (a volume, its network).
const warningSelector = "involvedObject.kind=Pod,type=Warning"

// warningsAfter is how long a pod may be on its way to starting before its Warning events are
// watched: most start within it, and a 200-node run then adds no watch.
const warningsAfter = 30 * time.Second

// podWarnings are pod p's Warning events (none when gpuvet may not list events there).
func (w *nsWatch) podWarnings(cs kubernetes.Interface, p *corev1.Pod) []*corev1.Event {
	w.warningsOnce.Do(func() { w.warnings = w.watchEvents(cs, p.Namespace, warningSelector) })
	if w.warnings == nil || !synced(w.warnings, 2*time.Second) {
		return nil
	}
	var out []*corev1.Event
	for _, o := range w.warnings.GetStore().List() {
		if e, ok := o.(*corev1.Event); ok && e.InvolvedObject.UID == p.UID {
			out = append(out, e)
		}
	}
	return out
}

// synced waits up to d for inf's first list (a wait just started it; its events' wake-ups may come
// before it says it has synced).
func synced(inf cache.SharedIndexInformer, d time.Duration) bool {
	if inf.HasSynced() {
		return true
	}
	stop := make(chan struct{})
	t := time.AfterFunc(d, func() { close(stop) })
	defer t.Stop()
	return cache.WaitForCacheSync(stop, inf.HasSynced)
}

// watchEvents starts an informer of ns's events that selector picks (nil when gpuvet may not
// list them, or the API does not answer: best effort, as without events).
func (w *nsWatch) watchEvents(cs kubernetes.Interface, ns, selector string) cache.SharedIndexInformer {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector, Limit: 1}); err != nil {
		return nil
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	inf := f.Core().V1().Events().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: w.signal, UpdateFunc: func(_, o any) { w.signal(o) }})
	f.Start(w.stop)
	return inf
}

// transient tells an API error worth waiting out (overload, throttling, a timeout, a dropped
// connection) from one that ends the wait. client-go retries a 429 or 5xx with Retry-After itself;
// what reaches gpuvet after that, or without the header, is waited out with a backoff.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// backoff is a wait's delay after a transient error: doubling from 1 s to 30 s.
type backoff struct{ d time.Duration }

func (b *backoff) next() time.Duration {
	b.d = min(max(2*b.d, time.Second), 30*time.Second)
	return b.d
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
