package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	flowv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/gpuvet/gpuvet/internal/k8s"
)

// The cluster side of the harness: the kwok GPU nodes, gpuvet's own user (so that the API server
// counts its requests apart from the controllers', kwok's and the player's), and the API server's
// request counters.

// scaleUser is who gpuvet runs as in the harness: the admin token impersonating this user (bound to
// cluster-admin), matched by a FlowSchema of its own, whose priority-and-fairness counters are
// gpuvet's requests as the API server saw them.
const scaleUser = "gpuvet-scale"

// cluster is the harness's admin connection.
type cluster struct {
	kubeconfig string
	cs         kubernetes.Interface
	dyn        dynamic.Interface
	player     *k8s.RequestCount // the player's own requests (its client is this one)
}

func connect(kubeconfig string) (*cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 2000 // the player's: it stands in for a thousand kubelets
	c := &cluster{kubeconfig: kubeconfig, player: k8s.CountRequests(cfg)}
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// nodeName is the i-th kwok GPU node.
func nodeName(i int) string { return fmt.Sprintf("kwok-gpu-%d", i) }

// ensureNodes makes the cluster's kwok GPU nodes exactly kwok-gpu-0 … kwok-gpu-(n-1), 8 GPUs each,
// and waits until kwok has them Ready.
func (c *cluster) ensureNodes(ctx context.Context, n int) error {
	l, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, nd := range l.Items {
		have[nd.Name] = true
	}
	want := map[string]bool{}
	for i := range n {
		want[nodeName(i)] = true
	}
	var errs []string
	var mu sync.Mutex
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	do := func(f func() error) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
			}
		}()
	}
	for name := range have {
		if !want[name] {
			do(func() error { return ignoreNotFound(c.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})) })
		}
	}
	for i := range n {
		if name := nodeName(i); !have[name] {
			do(func() error {
				_, err := c.cs.CoreV1().Nodes().Create(ctx, gpuNode(name), metav1.CreateOptions{})
				return err
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("creating nodes: %d errors, first: %s", len(errs), errs[0])
	}
	for {
		l, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, nd := range l.Items {
			if want[nd.Name] && nodeUsable(&nd) {
				ready++
			}
		}
		if ready == n && len(l.Items) == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d nodes Ready (%d nodes): %w", ready, n, len(l.Items), ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// keepAddresses gives back their address to kwok nodes that lost it, every few seconds until ctx
// ends. kwok's heartbeat stage (node-heartbeat-with-lease, 10-20 min after a node is Ready) drops a
// node's status.addresses on some nodes (536 of 1,000 here); without an address the API server
// cannot reach kwok for the node's pod logs ("no preferred addresses found"), and every Job on the
// node waits out its timeout. A kubelet keeps its node's addresses; the player stands in for it.
func (c *cluster) keepAddresses(ctx context.Context, logf func(string, ...any)) {
	patch := []byte(`{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"}]}}`)
	for ctx.Err() == nil {
		l, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err == nil {
			n := 0
			for _, nd := range l.Items {
				if len(nd.Status.Addresses) == 0 && nd.Annotations["kwok.x-k8s.io/node"] == "fake" {
					if _, err := c.cs.CoreV1().Nodes().Patch(ctx, nd.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err == nil {
						n++
					}
				}
			}
			if n > 0 {
				logf("gave %d kwok node(s) back the address kwok's heartbeat dropped", n)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
}

// nodeUsable: Ready, and the node lifecycle controller has lifted the not-ready taint it puts on
// a new node (gpuvet would skip the node for it).
func nodeUsable(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, cd := range n.Status.Conditions {
		if cd.Type == corev1.NodeReady {
			return cd.Status == corev1.ConditionTrue
		}
	}
	return false
}

func gpuNode(name string) *corev1.Node {
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	rl := corev1.ResourceList{corev1.ResourceCPU: q("32"), corev1.ResourceMemory: q("256Gi"), corev1.ResourcePods: q("110"), k8s.GPUResource: q("8")}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true",
				k8s.ProductLabel: "NVIDIA-H200"}},
		Status: corev1.NodeStatus{Allocatable: rl, Capacity: rl},
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// gpuvetKubeconfig writes a kubeconfig for gpuvet: the admin's, impersonating scaleUser, who is
// bound to cluster-admin and has a FlowSchema of its own.
func (c *cluster) gpuvetKubeconfig(ctx context.Context, dir string) (string, error) {
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: scaleUser},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: scaleUser}}}
	if _, err := c.cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	shares, queues, hand, qlen := int32(100), int32(64), int32(6), int32(50)
	pl := &flowv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: scaleUser},
		Spec: flowv1.PriorityLevelConfigurationSpec{Type: flowv1.PriorityLevelEnablementLimited, Limited: &flowv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: &shares,
			LimitResponse: flowv1.LimitResponse{Type: flowv1.LimitResponseTypeQueue,
				Queuing: &flowv1.QueuingConfiguration{Queues: queues, HandSize: hand, QueueLengthLimit: qlen}}}}}
	if _, err := c.cs.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, pl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	fs := &flowv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: scaleUser},
		Spec: flowv1.FlowSchemaSpec{PriorityLevelConfiguration: flowv1.PriorityLevelConfigurationReference{Name: scaleUser}, MatchingPrecedence: 100,
			DistinguisherMethod: &flowv1.FlowDistinguisherMethod{Type: flowv1.FlowDistinguisherMethodByUserType},
			Rules: []flowv1.PolicyRulesWithSubjects{{
				Subjects:         []flowv1.Subject{{Kind: flowv1.SubjectKindUser, User: &flowv1.UserSubject{Name: scaleUser}}},
				ResourceRules:    []flowv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, ClusterScope: true, Namespaces: []string{"*"}}},
				NonResourceRules: []flowv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}}}}}
	if _, err := c.cs.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	raw, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		return "", err
	}
	for _, a := range raw.AuthInfos {
		a.Impersonate = scaleUser
	}
	p := filepath.Join(dir, "gpuvet-kubeconfig")
	return p, clientcmd.WriteToFile(*raw, p)
}

// counters are the API server's request counts at one moment.
type counters struct {
	all    float64            // apiserver_request_total, every client
	gpuvet float64            // apiserver_flowcontrol_dispatched_requests_total of scaleUser's FlowSchema
	byVerb map[string]float64 // apiserver_request_total by verb, every client
}

// scrape reads the API server's /metrics.
func (c *cluster) scrape(ctx context.Context) (counters, error) {
	b, err := c.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return counters{}, fmt.Errorf("the API server's /metrics: %w", err)
	}
	return parseCounters(b)
}

// parseCounters reads the request counters from a Prometheus text exposition.
func parseCounters(b []byte) (counters, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return counters{}, fmt.Errorf("the API server's /metrics: %w", err)
	}
	c := counters{byVerb: map[string]float64{}}
	if f := fams["apiserver_request_total"]; f != nil {
		for _, m := range f.Metric {
			v := m.GetCounter().GetValue()
			c.all += v
			for _, l := range m.Label {
				if l.GetName() == "verb" {
					c.byVerb[l.GetValue()] += v
				}
			}
		}
	} else {
		return c, fmt.Errorf("the API server's /metrics has no apiserver_request_total")
	}
	if f := fams["apiserver_flowcontrol_dispatched_requests_total"]; f != nil {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "flow_schema" && l.GetValue() == scaleUser {
					c.gpuvet += m.GetCounter().GetValue()
				}
			}
		}
	}
	return c, nil
}

func (a counters) minus(b counters) counters {
	d := counters{all: a.all - b.all, gpuvet: a.gpuvet - b.gpuvet, byVerb: map[string]float64{}}
	for k, v := range a.byVerb {
		if x := v - b.byVerb[k]; x > 0 {
			d.byVerb[k] = x
		}
	}
	return d
}

func (a counters) verbs() string {
	var s []string
	for _, v := range []string{"GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"} {
		if a.byVerb[v] > 0 {
			s = append(s, fmt.Sprintf("%s %.0f", v, a.byVerb[v]))
		}
	}
	return strings.Join(s, ", ")
}

// leftovers lists what gpuvet left on the cluster and in its state directory: run namespaces,
// pods and Jobs of any run (the kept model cache's namespace and PVCs stay by design), manifests.
func (c *cluster) leftovers(ctx context.Context, state string) ([]string, error) {
	var out []string
	sel := metav1.ListOptions{LabelSelector: k8s.LabelManagedBy + "=" + k8s.ManagedBy}
	ns, err := c.cs.CoreV1().Namespaces().List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, n := range ns.Items {
		out = append(out, "namespace "+n.Name)
	}
	pods, err := c.cs.CoreV1().Pods("").List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		out = append(out, "pod "+p.Namespace+"/"+p.Name)
	}
	jobs, err := c.cs.BatchV1().Jobs("").List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs.Items {
		out = append(out, "job "+j.Namespace+"/"+j.Name)
	}
	m, _ := filepath.Glob(filepath.Join(state, "*.json"))
	for _, f := range m {
		out = append(out, "manifest "+f)
	}
	return out, nil
}

// podCount is how many pods of gpuvet's exist now.
func (c *cluster) podCount(ctx context.Context) int {
	pods, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelManagedBy + "=" + k8s.ManagedBy, ResourceVersion: "0"})
	if err != nil {
		return 0
	}
	return len(pods.Items)
}

// cpu is the CPU seconds so far of the control plane's processes (their pid files beside the
// kubeconfig, as scripts/k8s-test-env.sh writes them) and of this process (the player).
func (c *cluster) cpu() map[string]float64 {
	out := map[string]float64{}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		out["player"] = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	dir := filepath.Dir(c.kubeconfig)
	for _, p := range []string{"apiserver", "etcd", "controller-manager", "scheduler", "kwok"} {
		pid, err := os.ReadFile(filepath.Join(dir, p+".pid"))
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) > 12 {
			u, _ := strconv.ParseFloat(f[11], 64)
			s, _ := strconv.ParseFloat(f[12], 64)
			out[p] = (u + s) / clockTicks
		}
	}
	return out
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on Linux).
const clockTicks = 100

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// gpuvetTaints are the nodes with gpuvet's quarantine taint, with its value (the run's id), and
// those with its pending taint.
func (c *cluster) gpuvetTaints(ctx context.Context) (quarantined map[string]string, pending map[string]bool, err error) {
	l, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	quarantined, pending = map[string]string{}, map[string]bool{}
	for _, n := range l.Items {
		for _, t := range n.Spec.Taints {
			switch t.Key {
			case k8s.TaintUnhealthy:
				quarantined[n.Name] = t.Value
			case k8s.TaintPending:
				pending[n.Name] = true
			}
		}
	}
	return quarantined, pending, nil
}

// markPending gives the first n nodes gpuvet's pending taint, as a node joining the fleet has it
// from its provisioning (docs/acceptance.md), so that the gate's run vets them first and releases
// or quarantines each.
func (c *cluster) markPending(ctx context.Context, n int) error {
	names := make([]string, n)
	for i := range names {
		names[i] = nodeName(i)
	}
	_, err := c.editNodes(ctx, names, func(nd *corev1.Node) {
		if !slices.ContainsFunc(nd.Spec.Taints, func(t corev1.Taint) bool { return t.Key == k8s.TaintPending }) {
			nd.Spec.Taints = append(nd.Spec.Taints, corev1.Taint{Key: k8s.TaintPending, Effect: corev1.TaintEffectNoSchedule})
		}
	})
	return err
}

// resetVerdicts takes every gpuvet.io/ taint, label and annotation off the nodes (a verdict run's,
// or a `gpuvet clean --untaint`'s pending taint), so that the next run picks its nodes as on a
// fresh fleet: gpuvet vets due nodes first (pending, then never vetted), and tolerates its own
// taints. The GPUVetted condition stays: node selection does not read it.
func (c *cluster) resetVerdicts(ctx context.Context) (int, error) {
	l, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	var names []string
	for _, nd := range l.Items {
		if marked(&nd) {
			names = append(names, nd.Name)
		}
	}
	return c.editNodes(ctx, names, unmark)
}

// editNodes updates the named nodes with edit, 16 at once, each read again on a conflict; it
// returns how many were written.
func (c *cluster) editNodes(ctx context.Context, names []string, edit func(*corev1.Node)) (int, error) {
	var (
		mu   sync.Mutex
		errs []string
		n    int
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, 16)
	for _, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := c.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				edit(cur)
				_, err = c.cs.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, name+": "+err.Error())
			} else {
				n++
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return n, fmt.Errorf("updating %d node(s), first: %s", len(errs), errs[0])
	}
	return n, nil
}

func marked(n *corev1.Node) bool {
	c := n.DeepCopy()
	unmark(c)
	return len(c.Spec.Taints) != len(n.Spec.Taints) || len(c.Labels) != len(n.Labels) || len(c.Annotations) != len(n.Annotations)
}

// unmark drops gpuvet's own marks from a node.
func unmark(n *corev1.Node) {
	own := func(k string) bool { return strings.HasPrefix(k, k8s.Domain) }
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return own(t.Key) })
	maps.DeleteFunc(n.Labels, func(k, _ string) bool { return own(k) })
	maps.DeleteFunc(n.Annotations, func(k, _ string) bool { return own(k) })
}
