package k8s

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Per-GPU quarantine. Where the cluster allocates GPUs through DRA (a driver publishes each GPU as a
// ResourceSlice device with its uuid as an attribute) and serves DeviceTaintRules
// (resource.k8s.io/v1, KEP-5055), a node whose only hardware findings are its GPUs' loses just
// those: one NoSchedule DeviceTaintRule each, under gpuvet's quarantine key with the run's id.
// Otherwise (no slices, a GPU not among them, no permission, an interconnect or host finding) the
// node is tainted, and the run says why. A later run replaces the rules, `gpuvet clean --untaint`
// deletes them; nothing else is touched.

// AnnotationDeviceReason on a DeviceTaintRule says why the GPU was taken (the run, its verdict).
const AnnotationDeviceReason = Domain + "reason"

// deviceRef is one GPU's DRA device: where a DeviceTaintRule's selector finds it.
type deviceRef struct {
	gpu                  int
	uuid                 string
	driver, pool, device string
}

func (d deviceRef) String() string {
	return fmt.Sprintf("gpu %d (%s) as DRA device %s/%s/%s", d.gpu, d.uuid, d.driver, d.pool, d.device)
}

// takenGPUs are the GPUs of h a per-GPU quarantine would take under v: those failed (or flagged,
// with taint_flagged or the gate), each with a UUID, when no finding is the interconnect's or the
// host's. nil: the node's matter.
func takenGPUs(h *results.Host, v Verdicts) []results.GPUVerdict {
	for _, l := range []string{results.LayerInterconnect, results.LayerHost} {
		if st := h.Layers[l]; st == results.StatusFlag || st == results.StatusFailed {
			return nil
		}
	}
	var out []results.GPUVerdict
	for _, g := range h.GPUs {
		if g.Status == results.StatusFailed || (g.Status == results.StatusFlag && (v.TaintFlagged || v.Gate)) {
			if g.UUID == "" {
				return nil
			}
			out = append(out, g)
		}
	}
	return out
}

// restStatus is the hardware status of h without the GPUs taken: the worst of the others'.
func restStatus(h *results.Host, taken []results.GPUVerdict) results.Status {
	st := results.StatusOK
	for _, g := range h.GPUs {
		if !slices.ContainsFunc(taken, func(t results.GPUVerdict) bool { return t.Index == g.Index }) {
			st = results.Worse(st, g.Status)
		}
	}
	return st
}

// findDevices finds each GPU among the node's DRA devices by their uuid attribute ("uuid" or
// "<driver>/uuid"). why says what stopped it ("" when every GPU was found).
func findDevices(ctx context.Context, cs kubernetes.Interface, node string, gpus []results.GPUVerdict) ([]deviceRef, string) {
	sl, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if apierrors.IsNotFound(err) {
		return nil, noDRA
	}
	if err != nil {
		return nil, "its DRA devices could not be listed (" + apiWhy(err) + ")"
	}
	byUUID := map[string]deviceRef{}
	for _, s := range sl.Items {
		if s.Spec.NodeName == nil || *s.Spec.NodeName != node { // the selector's, checked here too
			continue
		}
		for _, d := range s.Spec.Devices {
			for k, a := range d.Attributes {
				if a.StringValue != nil && (k == "uuid" || k == resourcev1.QualifiedName(s.Spec.Driver+"/uuid")) {
					byUUID[*a.StringValue] = deviceRef{uuid: *a.StringValue, driver: s.Spec.Driver, pool: s.Spec.Pool.Name, device: d.Name}
				}
			}
		}
	}
	if len(byUUID) == 0 {
		return nil, noDRA
	}
	var out []deviceRef
	for _, g := range gpus {
		d, ok := byUUID[g.UUID]
		if !ok {
			return nil, fmt.Sprintf("gpu %d (%s) is not among its DRA devices", g.Index, g.UUID)
		}
		d.gpu = g.Index
		out = append(out, d)
	}
	return out, ""
}

// noDRA is why a node without DRA GPUs is quarantined whole: the common case, not said.
const noDRA = "it publishes no DRA device with a uuid attribute (no DRA GPU driver on it)"

// apiWhy is an API error in a few words.
func apiWhy(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden: grant list resourceslices and create, update, delete devicetaintrules (docs/kubernetes.md)"
	case apierrors.IsNotFound(err):
		return "the API serves no resource.k8s.io/v1 DRA objects"
	}
	return err.Error()
}

// deviceRuleName is the DeviceTaintRule of one GPU of a node: one per GPU, replaced by a later run.
func deviceRuleName(node string, gpu int) string {
	name := fmt.Sprintf("gpuvet-%s-gpu%d", node, gpu)
	if len(name) > 253 {
		name = fmt.Sprintf("gpuvet-%x-gpu%d", sha256.Sum256([]byte(node)), gpu) // a node name near the limit
	}
	return name
}

// deviceRule is the DeviceTaintRule that takes GPU d out of scheduling for run vd.
func deviceRule(node string, d deviceRef, vd Verdict) *resourcev1.DeviceTaintRule {
	return &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{
			Name:        deviceRuleName(node, d.gpu),
			Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelPartOf: ManagedBy, LabelRun: vd.RunID},
			Annotations: map[string]string{AnnotationDeviceReason: truncate(fmt.Sprintf("run %s at %s: node %s %s: %s", vd.RunID, vd.At.UTC().Format(time.RFC3339), node, d, vd.Reason), maxReason)},
		},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: &d.driver, Pool: &d.pool, Device: &d.device},
			Taint:          resourcev1.DeviceTaint{Key: TaintUnhealthy, Value: vd.RunID, Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}
}

// taintDevices creates (or replaces an earlier run's) one DeviceTaintRule per GPU and says what it
// did; a dry run only says. A rule of that name that is not gpuvet's is left, and is an error.
func taintDevices(ctx context.Context, cs kubernetes.Interface, node string, devs []deviceRef, vd Verdict, dry bool) ([]string, error) {
	var did []string
	rules := cs.ResourceV1().DeviceTaintRules()
	for _, d := range devs {
		want := deviceRule(node, d, vd)
		what := fmt.Sprintf("tainted %s alone: DeviceTaintRule %s %s=%s:NoSchedule", d, want.Name, TaintUnhealthy, vd.RunID)
		if !dry {
			_, err := rules.Create(ctx, want, metav1.CreateOptions{FieldManager: "gpuvet"})
			if apierrors.IsAlreadyExists(err) {
				err = replaceRule(ctx, cs, want)
			}
			if err != nil {
				return did, fmt.Errorf("DeviceTaintRule %s: %w", want.Name, err)
			}
		}
		did = append(did, what)
	}
	return did, nil
}

// replaceRule puts want in place of gpuvet's rule of that name (an earlier run's).
func replaceRule(ctx context.Context, cs kubernetes.Interface, want *resourcev1.DeviceTaintRule) error {
	rules := cs.ResourceV1().DeviceTaintRules()
	cur, err := rules.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cur.Labels[LabelManagedBy] != ManagedBy {
		return fmt.Errorf("a DeviceTaintRule of that name is not gpuvet's (no %s=%s label): left as it is", LabelManagedBy, ManagedBy)
	}
	want.ResourceVersion = cur.ResourceVersion
	_, err = rules.Update(ctx, want, metav1.UpdateOptions{FieldManager: "gpuvet"})
	return err
}

// untaintDevices deletes gpuvet's DeviceTaintRules (every run's, or only runID's) and says what it
// lifted.
func untaintDevices(ctx context.Context, cs kubernetes.Interface, runID string) ([]string, error) {
	// The current labels' selector: DeviceTaintRules are newer than legacyRun.
	lo := metav1.ListOptions{LabelSelector: runSelectors(runID)[0]}
	rl, err := cs.ResourceV1().DeviceTaintRules().List(ctx, lo)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, nil // not served, or not this identity's to see: none gpuvet could have made with it
	}
	if err != nil {
		return nil, fmt.Errorf("listing DeviceTaintRules: %s", apiWhy(err))
	}
	var done []string
	var errs []error
	for _, r := range rl.Items {
		err := cs.ResourceV1().DeviceTaintRules().Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("DeviceTaintRule %s: %w", r.Name, err))
			continue
		}
		done = append(done, fmt.Sprintf("deleted DeviceTaintRule %s (%s, run %s): its GPU schedules again", r.Name, selectorText(r.Spec.DeviceSelector), r.Labels[LabelRun]))
	}
	return done, errors.Join(errs...)
}

func selectorText(s *resourcev1.DeviceTaintSelector) string {
	if s == nil {
		return "no selector"
	}
	var p []string
	for _, v := range []*string{s.Driver, s.Pool, s.Device} {
		if v != nil {
			p = append(p, *v)
		}
	}
	return "device " + strings.Join(p, "/")
}
