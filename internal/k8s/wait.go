package k8s

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuvet/gpuvet/internal/results"
)

// pollEvery is how often what is still polled (a namespace or pod being deleted) is looked at; the
// watched waits (watch.go) derive their few look-ups' pacing from it.
var pollEvery = 500 * time.Millisecond

// pollUntil calls check every pollEvery until it is done or fails (its error), or ctx ends (over).
func pollUntil(ctx context.Context, check func() (bool, error)) (over bool, err error) {
	for {
		if done, err := check(); done || err != nil {
			return false, err
		}
		select {
		case <-ctx.Done():
			return true, nil
		case <-time.After(pollEvery):
		}
	}
}

// PodError is a pod that cannot start or run, with the reason Kubernetes gave.
type PodError struct {
	Pod       string
	Reason    string // Unschedulable, ErrImagePull, ImagePullBackOff, CrashLoopBackOff, OOMKilled, Failed
	Detail    string
	Disrupted bool // Kubernetes stopped the pod (Reason is the DisruptionTarget condition's)
	// Infra: what failed it is the cluster's (the node's pod network, a volume, a registry that
	// kept failing), not the engine's or its image's.
	Infra bool
}

// Layer is the infrastructure's for a pod the cluster could not start, else "" (the judge reads
// the words: an engine's crash, a missing image).
func (e *PodError) Layer() string {
	if e.Infra {
		return results.LayerInfra
	}
	return ""
}

func (e *PodError) Error() string { return fmt.Sprintf("pod %s: %s: %s", e.Pod, e.Reason, e.Detail) }

// Disruption is what stopped the pod when Kubernetes took it for something outside the hardware
// (preempted, evicted, drained): its work is inconclusive, not failed (results.Disrupted). "" for
// every other problem.
func (e *PodError) Disruption() string {
	if !e.Disrupted {
		return ""
	}
	words, ok := disruptionWords[e.Reason]
	if !ok {
		words = "stopped by Kubernetes: " + e.Reason
	}
	return fmt.Sprintf("pod %s %s (%s)", e.Pod, words, strings.TrimSpace(e.Detail))
}

// disruptionWords say what each DisruptionTarget reason did to a pod.
var disruptionWords = map[string]string{
	"PreemptionByScheduler":  "preempted by the scheduler for higher-priority work (kubernetes.priority_class)",
	"EvictionByEvictionAPI":  "evicted (a drain or a disruption budget's eviction)",
	"DeletionByTaintManager": "deleted by the taint manager (a NoExecute taint on its node)",
	"DeletionByPodGC":        "deleted by the pod garbage collector (its node went away)",
	"TerminationByKubelet":   "terminated by the kubelet (node pressure or shutdown)",
	"Deleted":                "deleted by someone or something else",
}

// disruption is the pod's DisruptionTarget condition as a problem (nil when it has none).
func disruption(p *corev1.Pod) *PodError {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return &PodError{Pod: p.Name, Reason: c.Reason, Detail: c.Message, Disrupted: true}
		}
	}
	return nil
}

// waitingFatal are container waiting reasons that never fix themselves, or (pullRetried) that
// decide once they have lasted a pull's grace.
var waitingFatal = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "RegistryUnavailable": true,
	"InvalidImageName": true, "ErrImageNeverPull": true, "SignatureValidationFailed": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "CrashLoopBackOff": true, "RunContainerError": true}

// pullRetried are the waiting reasons of an image pull the kubelet tries again, with a back-off that
// grows to 5 minutes: a registry's 429 or a timeout under 200 nodes pulling one large image at once
// often clears at a later try.
var pullRetried = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "RegistryUnavailable": true}

// pullFinal says whether a failed pull's message (the kubelet's, the runtime's error within it)
// names a cause the next try repeats: the image or tag is not there, or the registry refuses the
// credentials. Any other is given the pull's grace.
func pullFinal(msg string) bool {
	m := strings.ToLower(msg)
	for _, w := range []string{"not found", "manifest unknown", "name unknown", "unauthorized", "denied",
		"forbidden", "authentication required", "invalid reference format"} {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

// startWait is one wait's grace for a pod's start that may still come (kubernetes.start_grace):
// since when each container's image pull has been failing; the Warning events say since when a
// volume or the network sandbox has. A nil one gives none (the pod has already ended).
type startWait struct {
	grace time.Duration
	since map[string]time.Time // pod UID/container → the first failed pull seen
}

func newStartWait(grace time.Duration) *startWait {
	return &startWait{grace: grace, since: map[string]time.Time{}}
}

// startRetried are the Warning reasons of a pod Kubernetes keeps trying to start: its volumes (a
// claim still attached to another node, a mount that times out) and its network sandbox (a node
// whose CNI is broken). Without them such a pod waits out engine.ready_timeout (20 minutes).
var startRetried = map[string]bool{"FailedMount": true, "FailedAttachVolume": true, "FailedCreatePodSandBox": true}

// stillFailing is how recent a start error's last try must be for it to go on: the kubelet tries
// a mount again within about 2 minutes. A mount that failed once early (its namespace's CA not
// there yet) and then worked is not held against a pod that is now pulling a large image.
const stillFailing = 3 * time.Minute

// started says whether any of the pod's containers (an init container included) has run: its
// volumes are mounted and its sandbox is up.
func started(p *corev1.Pod) bool {
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return p.Status.Phase != "" && p.Status.Phase != corev1.PodPending
}

// stalled is the start problem of a pod none of whose containers has run, from its Warning
// events: one of startRetried going on for longer than the grace (nil: none; before warningsAfter
// the events are not read). last is its newest Warning (a readiness probe's too), for a wait that
// ends at its timeout.
func (sw *startWait) stalled(w *nsWatch, cs kubernetes.Interface, p *corev1.Pod) (pe *PodError, last string) {
	if sw == nil || p.CreationTimestamp.IsZero() || time.Since(p.CreationTimestamp.Time) < warningsAfter {
		return nil, ""
	}
	var first *corev1.Event
	var newest time.Time
	for _, e := range w.podWarnings(cs, p) {
		if t := eventLast(e); !t.Before(newest) {
			newest, last = t, e.Reason+": "+e.Message
		}
		ongoing := time.Since(eventLast(e)) < stillFailing
		if startRetried[e.Reason] && ongoing && (first == nil || eventFirst(e).Before(eventFirst(first))) {
			first = e
		}
	}
	if first == nil || started(p) || time.Since(eventFirst(first)) < sw.grace {
		return nil, last
	}
	return &PodError{Pod: p.Name, Reason: first.Reason, Infra: true, Detail: fmt.Sprintf("%s (Kubernetes has tried for %s, past kubernetes.start_grace %s)",
		first.Message, time.Since(eventFirst(first)).Round(time.Second), sw.grace)}, last
}

// eventFirst and eventLast are when an event was first and last seen (the core/v1 timestamps, or
// an events/v1 recorder's event time and series).
func eventFirst(e *corev1.Event) time.Time {
	if !e.FirstTimestamp.IsZero() {
		return e.FirstTimestamp.Time
	}
	return e.EventTime.Time
}

func eventLast(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return eventFirst(e)
}

// waits says whether container c's failed pull (waiting w) is still within its grace, and, once
// not, what to say of it.
func (sw *startWait) waits(p *corev1.Pod, c string, w *corev1.ContainerStateWaiting) (bool, string) {
	if sw == nil || !pullRetried[w.Reason] || pullFinal(w.Message) {
		return false, w.Message
	}
	key := string(p.UID) + "/" + c
	first, ok := sw.since[key]
	if !ok {
		first = time.Now()
		sw.since[key] = first
	}
	failing := time.Since(first)
	if failing < sw.grace {
		return true, ""
	}
	return false, fmt.Sprintf("the image pull has failed for %s, past kubernetes.start_grace (%s); the kubelet's last: %s",
		failing.Round(time.Second), sw.grace, w.Message)
}

// volumeBinding tells a scheduler message about a volume still binding ("unbound immediate
// PersistentVolumeClaims", "bound to non-existent persistentvolume" while the scheduler catches up)
// from one that will not fix itself: it is no verdict (one that never binds ends at the timeout).
func volumeBinding(msg string) bool {
	return strings.Contains(strings.ToLower(msg), "persistentvolume")
}

// podProblem returns why a pod will not become Ready or run to the end (nil: nothing wrong yet).
// logs fetches a container's last lines for a crash-looping one.
func podProblem(p *corev1.Pod, logs func(container string, previous bool) string, starts *startWait) *PodError {
	if d := disruption(p); d != nil { // first: a preempted pod also ends Failed, with exit codes
		return d
	}
	if e := unschedulable(p); e != nil {
		return e
	}
	// Init containers first: a pod whose init container fails never starts its containers.
	inits := len(p.Status.InitContainerStatuses)
	all := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
	for _, cs := range all {
		if e := containerProblem(p, cs, logs, starts); e != nil {
			return e
		}
	}
	if p.Status.Phase == corev1.PodFailed {
		return failedPod(p, all, inits, logs)
	}
	return nil
}

// unschedulable is a pod the scheduler cannot place, but for a volume still binding.
func unschedulable(p *corev1.Pod) *PodError {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
			!volumeBinding(c.Message) {
			return &PodError{Pod: p.Name, Reason: "Unschedulable", Detail: c.Message}
		}
	}
	return nil
}

// containerProblem is why one of a pod's containers will not run: killed for memory, or waiting
// for a reason that will not clear by itself (an image pull past its grace, a crash loop with its
// last log lines).
func containerProblem(p *corev1.Pod, cs corev1.ContainerStatus, logs func(container string, previous bool) string, starts *startWait) *PodError {
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t != nil && t.Reason == "OOMKilled" {
			return &PodError{Pod: p.Name, Reason: "OOMKilled", Detail: fmt.Sprintf("container %s was killed for memory (exit %d): raise its memory limit or lower the model's footprint", cs.Name, t.ExitCode)}
		}
	}
	w := cs.State.Waiting
	if w == nil || !waitingFatal[w.Reason] {
		return nil
	}
	wait, d := starts.waits(p, cs.Name, w)
	if wait {
		return nil
	}
	if w.Reason == "CrashLoopBackOff" {
		d = fmt.Sprintf("container %s restarted %s", cs.Name, times(cs.RestartCount))
		if t := cs.LastTerminationState.Terminated; t != nil {
			d += fmt.Sprintf(", last exit %d (%s)", t.ExitCode, t.Reason)
		}
		if logs != nil {
			if l := logs(cs.Name, true); l != "" {
				d += "; last log lines:\n" + l
			}
		}
	}
	return &PodError{Pod: p.Name, Reason: w.Reason, Detail: d, Infra: pullRetried[w.Reason] && !pullFinal(w.Message)}
}

// failedPod says why a pod ended Failed: each container's non-zero exit, and an init container's
// last log lines (its containers never ran: its log is the only one).
func failedPod(p *corev1.Pod, all []corev1.ContainerStatus, inits int, logs func(container string, previous bool) string) *PodError {
	d := p.Status.Message
	for i, cs := range all {
		t := cs.State.Terminated
		if t == nil || t.ExitCode == 0 {
			continue
		}
		what := "container"
		if i < inits {
			what = "init container"
		}
		d = strings.TrimSpace(fmt.Sprintf("%s %s %s exit %d (%s)", d, what, cs.Name, t.ExitCode, t.Reason))
		if i < inits && logs != nil {
			if l := logs(cs.Name, false); l != "" {
				d += "; its last log lines:\n" + l
			}
		}
	}
	return &PodError{Pod: p.Name, Reason: "Failed", Detail: d}
}

// times is "once", "2 times": how often a container restarted.
func times(n int32) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tailLogs reads the last 20 lines of a container of the pod ("" when there is none): podProblem's logs.
func tailLogs(ctx context.Context, cs kubernetes.Interface, ns, pod string) func(container string, previous bool) string {
	return func(container string, previous bool) string {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n := int64(20)
		b, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous, TailLines: &n}).DoRaw(ctx)
		if err != nil && previous {
			b, err = cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &n}).DoRaw(ctx)
		}
		if err != nil {
			return ""
		}
		return strings.TrimRight(string(b), "\n")
	}
}

// WaitPodsReady waits until every named pod is Ready, failing at once with the first pod's
// problem (podProblem). It reads the pods from the namespace's shared informer (watch.go).
func WaitPodsReady(parent context.Context, cs kubernetes.Interface, ns string, names []string, timeout, startGrace time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	w, release := watchNamespace(cs, ns)
	defer release()
	next, unsubscribe := w.subscribe(names...)
	defer unsubscribe()
	start := time.Now()
	seen, asked, starts := map[string]bool{}, map[string]bool{}, newStartWait(startGrace)
	for {
		ready := 0
		var pending []string
		if w.synced() {
			for _, n := range names {
				p, ok := w.pod(ns, n)
				if !ok {
					if err := podGone(ctx, cs, ns, n, seen[n], asked, start); err != nil {
						return err
					}
					pending = append(pending, n+" (not seen yet)")
					continue
				}
				seen[n] = true
				if pe := podProblem(p, tailLogs(ctx, cs, ns, n), starts); pe != nil {
					return pe
				}
				if podReady(p) {
					ready++
					continue
				}
				pe, last := starts.stalled(w, cs, p)
				if pe != nil {
					return pe
				}
				what := string(p.Status.Phase)
				if last != "" {
					what += "; its last warning: " + last
				}
				pending = append(pending, fmt.Sprintf("%s (%s)", n, what))
			}
			if ready == len(names) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if err := interrupted(parent); err != nil {
				return fmt.Errorf("%d of %d engine pods Ready: %w", ready, len(names), err)
			}
			if !w.synced() {
				return fmt.Errorf("engine pods not Ready after %s: the pod watch of namespace %s never synced (can gpuvet list and watch pods there?)", timeout, ns)
			}
			return fmt.Errorf("%d of %d engine pods Ready after %s; not ready: %s (raise engine.ready_timeout)", ready, len(names), timeout, strings.Join(pending, ", "))
		case <-next:
		case <-w.recheck(recheckEvery):
		}
	}
}

// WaitPodsGone waits until none of the named (deleted) pods is left in the namespace's informer.
func WaitPodsGone(ctx context.Context, cs kubernetes.Interface, ns string, names []string) error {
	w, release := watchNamespace(cs, ns)
	defer release()
	next, unsubscribe := w.subscribe(names...)
	defer unsubscribe()
	for {
		left := -1
		if w.synced() {
			left = 0
			for _, n := range names {
				if _, ok := w.pod(ns, n); ok {
					left++
				}
			}
			if left == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d pod(s) still there after the wait (%w)", left, len(names), ctx.Err())
		case <-next:
		case <-w.recheck(recheckEvery):
		}
	}
}

// podAddress is a pod's IP from the namespace's watch, else from the API.
func podAddress(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
	w, release := watchNamespace(cs, ns)
	defer release()
	if p, ok := w.pod(ns, name); ok && p.Status.PodIP != "" {
		return p.Status.PodIP, nil
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return p.Status.PodIP, nil
}

// podGone is the error of a pod the watch does not hold: one it held was deleted; one it never held
// is asked for once, a while after the wait began, so a pod never there fails as a Get would.
func podGone(ctx context.Context, cs kubernetes.Interface, ns, name string, wasSeen bool, asked map[string]bool, start time.Time) error {
	if wasSeen {
		return &PodError{Pod: name, Reason: "Deleted", Detail: "while gpuvet waited for it", Disrupted: true}
	}
	if asked[name] || time.Since(start) < 20*pollEvery {
		return nil
	}
	asked[name] = true
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil && ctx.Err() == nil && !transient(err) {
		return fmt.Errorf("pod %s: %w", name, err)
	}
	return nil
}

// WaitJob waits for a Job to finish and returns its pod's log (with the error of a failed Job). A
// Job whose pod cannot start fails at once. Only the log is read from the API; the rest is watched.
func WaitJob(parent context.Context, cs kubernetes.Interface, ns, name string, timeout, startGrace time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	w, release := watchNamespace(cs, ns)
	defer release()
	next, unsubscribe := w.subscribe(name) // the Job, its pods (by their job-name label) and its events
	defer unsubscribe()
	start := time.Now()
	var seen bool
	var bo backoff
	starts := newStartWait(startGrace)
	for {
		if w.synced() {
			j, ok := w.job(ns, name)
			if ok {
				seen = true
			} else if seen {
				return nil, fmt.Errorf("job %s: deleted while gpuvet waited for it", name)
			}
			pods := w.jobPods(name)
			// The Job controller keeps trying a pod the API refuses: its events say why.
			if len(pods) == 0 && time.Since(start) >= 4*pollEvery {
				if refused := w.refused(cs, ns, name); refused != "" {
					return nil, fmt.Errorf("job %s: its pod cannot be created: %s", name, refused)
				}
			}
			if len(pods) > 0 {
				if pe, _ := starts.stalled(w, cs, pods[len(pods)-1]); pe != nil {
					return nil, fmt.Errorf("job %s: %w", name, pe)
				}
				log, final, err := jobOutcome(ctx, cs, ns, name, j, pods[len(pods)-1], starts)
				if final {
					return log, err
				}
				if err != nil { // a transient error reading the log: wait it out
					sleepCtx(ctx, bo.next())
					continue
				}
			}
		}
		tick := recheckEvery
		if d := 4*pollEvery - time.Since(start); d > 0 && d < tick { // the first look at refusals
			tick = d
		}
		select {
		case <-ctx.Done():
			if err := interrupted(parent); err != nil {
				return nil, fmt.Errorf("job %s: %w", name, err)
			}
			return nil, fmt.Errorf("job %s did not finish within %s", name, timeout)
		case <-next:
		case <-w.recheck(tick):
		}
	}
}

// jobOutcome reads a Job's end from its pod: final once the wait is over; not final with a
// transient error (read again later), or without one while the Job still runs.
func jobOutcome(ctx context.Context, cs kubernetes.Interface, ns, name string, j *batchv1.Job, p *corev1.Pod, starts *startWait) ([]byte, bool, error) {
	done := ""
	if j != nil {
		done = jobDone(j)
	}
	if done != "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		opt := &corev1.PodLogOptions{}
		if len(p.Spec.Containers) > 0 { // the Job's container, not its init container
			opt.Container = p.Spec.Containers[0].Name
		}
		log, lerr := cs.CoreV1().Pods(ns).GetLogs(p.Name, opt).DoRaw(ctx)
		failed := p.Status.Phase == corev1.PodFailed || done == "failed"
		if lerr != nil && !failed {
			if transient(lerr) && ctx.Err() == nil {
				return nil, false, lerr
			}
			return nil, true, fmt.Errorf("job %s: reading the log of pod %s: %w", name, p.Name, lerr)
		}
		if d := disruption(p); failed && d != nil {
			return log, true, fmt.Errorf("job %s: %w", name, d)
		}
		if failed { // a container that never ran (its init container failed) has no log: the reason says why
			return log, true, fmt.Errorf("job %s failed: %s", name, podFailure(p, log, tailLogs(ctx, cs, ns, p.Name)))
		}
		if p.Status.Phase == corev1.PodSucceeded || done == "complete" {
			return log, true, nil
		}
	}
	if pe := podProblem(p, tailLogs(ctx, cs, ns, p.Name), starts); pe != nil {
		return nil, true, fmt.Errorf("job %s: %w", name, pe)
	}
	return nil, false, nil
}

// interrupted is the run's own end (Ctrl-C, a failing sibling) as an error, nil when only a wait's
// timeout passed: a wait cut short by the run must not claim its timeout was reached.
func interrupted(parent context.Context) error {
	if parent.Err() == nil {
		return nil
	}
	return fmt.Errorf("interrupted: %w", context.Cause(parent))
}

func jobDone(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return "complete"
		case batchv1.JobFailed:
			return "failed"
		}
	}
	return ""
}

func podFailure(p *corev1.Pod, log []byte, logs func(container string, previous bool) string) string {
	d := ""
	if pe := podProblem(p, logs, nil); pe != nil {
		d = pe.Reason + ": " + pe.Detail
	}
	if len(log) == 0 {
		return d
	}
	lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.TrimSpace(d + "; last log lines:\n" + strings.Join(lines, "\n"))
}
