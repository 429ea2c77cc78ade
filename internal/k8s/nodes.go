package k8s

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuvet/gpuvet/internal/results"
)

// GPUResource is the extended resource NVIDIA's device plugin advertises.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// ProductLabel is GPU feature discovery's label with the GPU's product name.
const ProductLabel = "nvidia.com/gpu.product"

// Node is a GPU node chosen for the run.
type Node struct {
	Name        string
	Allocatable int     // nvidia.com/gpu allocatable
	Free        int     // allocatable minus the GPU requests of the pods running there
	Product     string  // nvidia.com/gpu.product, "" when the label is absent
	CPU         float64 // allocatable CPU cores, where the node's load Jobs run (0: not advertised)
	// Due says why the node is due for a run (pending, its verdict expired, none): Due.
	Due string
}

// Selection says which nodes to use.
type Selection struct {
	Selector    string              // label selector (--node-selector)
	Tolerations []corev1.Toleration // pods tolerate these taints (--tolerations)
	Max         int                 // use at most this many nodes (0: all)
	Names       []string            // only these nodes (empty: any)
	OnlyDue     bool                // vet only nodes that are due (Due), skip the others
}

// CheckSelector checks a node label selector's form (kubernetes.node_selector).
func CheckSelector(s string) error {
	if _, err := labels.Parse(s); err != nil {
		return fmt.Errorf("%q is no label selector (want e.g. nvidia.com/gpu.product=NVIDIA-H200): %w", s, err)
	}
	return nil
}

// ChooseNodes lists the nodes matching the selection that have free GPUs; every other node the
// selector matched is returned as skipped, with the reason.
func ChooseNodes(ctx context.Context, cs kubernetes.Interface, sel Selection) ([]Node, []results.SkippedHost, error) {
	if err := CheckSelector(sel.Selector); err != nil {
		return nil, nil, fmt.Errorf("kubernetes.node_selector (--node-selector): %w", err)
	}
	nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.Selector})
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods (to subtract the GPUs in use): %w", err)
	}
	used := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			used[p.Spec.NodeName] += podGPUs(&p)
		}
	}
	items := nl.Items
	// Due nodes first, so --nodes N takes them first: the gate's bounded batch.
	now := time.Now()
	due := make(map[string]string, len(items))
	for i := range items {
		due[items[i].Name] = Due(&items[i], now)
	}
	sort.Slice(items, func(i, j int) bool {
		return cmp.Or(cmp.Compare(dueRank(due[items[i].Name]), dueRank(due[items[j].Name])), strings.Compare(items[i].Name, items[j].Name)) < 0
	})
	var out []Node
	var skipped []results.SkippedHost
	for i := range items {
		n := &items[i]
		if len(sel.Names) > 0 && !slices.Contains(sel.Names, n.Name) {
			continue
		}
		q := n.Status.Allocatable[GPUResource]
		alloc := q.Value()
		reason := ""
		switch {
		case alloc <= 0:
			reason = "no allocatable nvidia.com/gpu"
		case !nodeReady(n):
			reason = "not Ready"
		case n.Spec.Unschedulable:
			reason = "cordoned (unschedulable)"
		case untolerated(n.Spec.Taints, sel.Tolerations) != "":
			reason = "taint " + untolerated(n.Spec.Taints, sel.Tolerations) + " not tolerated (add --tolerations)"
		case alloc-used[n.Name] <= 0:
			reason = fmt.Sprintf("no free GPU: %d of %d nvidia.com/gpu requested by running pods", used[n.Name], alloc)
		case sel.OnlyDue && due[n.Name] == "":
			reason = "not due: verdict valid until " + n.Annotations[AnnotationValidUntil] + " (--only-due)"
		case sel.Max > 0 && len(out) >= sel.Max:
			reason = fmt.Sprintf("past --nodes %d", sel.Max)
		}
		if reason != "" {
			if alloc > 0 || sel.Selector != "" {
				skipped = append(skipped, results.SkippedHost{Name: n.Name, Reason: reason})
			}
			continue
		}
		cpu := n.Status.Allocatable[corev1.ResourceCPU]
		out = append(out, Node{Name: n.Name, Allocatable: int(alloc), Free: int(alloc - used[n.Name]), Product: n.Labels[ProductLabel],
			CPU: cpu.AsApproximateFloat64(), Due: due[n.Name]})
	}
	if len(out) == 0 {
		var why []string
		for _, s := range skipped {
			why = append(why, s.Name+": "+s.Reason)
		}
		if len(why) == 0 {
			why = []string{"no node advertises nvidia.com/gpu (is NVIDIA's device plugin or GPU operator installed?)"}
		}
		return nil, skipped, fmt.Errorf("no GPU node to vet (selector %q): %s", sel.Selector, strings.Join(why, "; "))
	}
	return out, skipped, nil
}

func podGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		q, ok := c.Resources.Requests[GPUResource]
		if !ok {
			q = c.Resources.Limits[GPUResource]
		}
		n += q.Value()
	}
	return n
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// untolerated returns the first NoSchedule/NoExecute taint none of the tolerations covers ("" none).
func untolerated(taints []corev1.Taint, tols []corev1.Toleration) string {
	for _, t := range taints {
		if t.Effect != corev1.TaintEffectPreferNoSchedule && !slices.ContainsFunc(tols, func(tol corev1.Toleration) bool { return tolerates(tol, t) }) {
			return t.ToString()
		}
	}
	return ""
}

// tolerates is the scheduler's toleration match (without the alpha comparison operators).
func tolerates(tol corev1.Toleration, t corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key == "" {
		return tol.Operator == corev1.TolerationOpExists
	}
	return tol.Key == t.Key && (tol.Operator == corev1.TolerationOpExists || tol.Value == t.Value)
}

// ParseTolerations reads --tolerations: comma-separated key[=value][:effect] (key=value uses
// operator Equal, key alone Exists; "*" tolerates everything).
func ParseTolerations(s string) ([]corev1.Toleration, error) {
	var out []corev1.Toleration
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if item == "*" {
			out = append(out, corev1.Toleration{Operator: corev1.TolerationOpExists})
			continue
		}
		var t corev1.Toleration
		kv, eff, hasEff := strings.Cut(item, ":")
		if hasEff {
			switch corev1.TaintEffect(eff) {
			case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
				t.Effect = corev1.TaintEffect(eff)
			default:
				return nil, fmt.Errorf("--tolerations %q: effect %q: want NoSchedule, PreferNoSchedule or NoExecute", item, eff)
			}
		}
		k, v, hasV := strings.Cut(kv, "=")
		if k == "" {
			return nil, fmt.Errorf("--tolerations %q: no key: want key[=value][:effect]", item)
		}
		t.Key, t.Operator = k, corev1.TolerationOpExists
		if hasV {
			t.Operator, t.Value = corev1.TolerationOpEqual, v
		}
		out = append(out, t)
	}
	return out, nil
}

// gpuQuantity is n nvidia.com/gpu as a resource list.
func gpuQuantity(n int) corev1.ResourceList {
	return corev1.ResourceList{GPUResource: *resource.NewQuantity(int64(n), resource.DecimalSI)}
}
