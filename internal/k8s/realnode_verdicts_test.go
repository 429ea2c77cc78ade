package k8s_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/k8s"
	"github.com/gpuvet/gpuvet/internal/results"
)

// TestRealNodeLabelTaint: on a real kubelet and scheduler, a run whose health phase finds a GPU
// computing wrong answers (the simulator's --sim-corrupt) fails the node, which --label-nodes and
// --taint-failed then mark failed and quarantine; the next run still gets its pods scheduled
// there (gpuvet tolerates its own taint; the real scheduler would refuse them otherwise), finds it
// healthy, labels it ok and says the quarantine stays; `gpuvet clean --untaint --run ID` lifts it,
// and nothing of the user's on the node changes.
func TestRealNodeLabelTaint(t *testing.T) {
	e := setupReal(t)
	markNodes(t, e.cs, realNode)
	state := t.TempDir()
	run := func(wantCode int, healthArgs string) (*results.Summary, string) {
		out := t.TempDir()
		log, code := e.gpuvet(t, state, e.realArgs(out, "", "--cache-size", "off", "--gpu-count", "2",
			"--health-args", healthArgs, "--label-nodes", "--taint-failed")...)
		if code != wantCode {
			t.Fatalf("exit %d, want %d:\n%s", code, wantCode, log)
		}
		s, err := results.Read(filepath.Join(out, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Hosts) != 1 || s.Hosts[0].Name != realNode {
			t.Fatalf("hosts %+v:\n%s", s.Hosts, log)
		}
		return s, log
	}
	bad, log := run(1, "--sim --sim-count 8 --dcgm=false --sim-corrupt 1")
	if bad.Hosts[0].Status != results.StatusFailed {
		t.Fatalf("a GPU computing wrong answers: node %s, want failed:\n%s", bad.Hosts[0].Status, log)
	}
	checkVerdicts(t, e.cs, bad)
	n := getNode(t, e.cs, realNode)
	t.Logf("failed node: taint %v, %s=%q", gpuvetTaint(n), k8s.AnnotationUnhealthyReason, n.Annotations[k8s.AnnotationUnhealthyReason])
	if !strings.Contains(n.Annotations[k8s.AnnotationUnhealthyReason], "gpu 1") {
		t.Errorf("the reason does not name the corrupt GPU: %q", n.Annotations[k8s.AnnotationUnhealthyReason])
	}

	good, log := run(0, "--sim --sim-count 8 --dcgm=false")
	if good.Hosts[0].Status == results.StatusFailed || len(good.Hosts[0].Models) != 1 || len(good.Hosts[0].Models[0].Endpoints) != 2 {
		t.Fatalf("the quarantined node was not vetted again: %+v\n%s", good.Hosts[0], log)
	}
	for _, ep := range good.Hosts[0].Models[0].Endpoints {
		if ep.Error != "" || ep.Load == nil {
			t.Errorf("gpu %v on the quarantined node: %q", ep.GPUs, ep.Error)
		}
	}
	n = getNode(t, e.cs, realNode)
	userMarksKept(t, n)
	if n.Labels[k8s.LabelStatus] != string(good.Hosts[0].Status) || n.Labels[k8s.LabelVettedBy] != good.RunID {
		t.Errorf("after the healthy run: labels %v", n.Labels)
	}
	if tn := gpuvetTaint(n); tn == nil || tn.Value != bad.RunID || !strings.Contains(log, "still tainted") {
		t.Errorf("a passing run lifted the quarantine (taint %v), or did not say it stays:\n%s", tn, log)
	}

	log, code := e.gpuvet(t, state, "clean", "--kubeconfig", e.kubeconfig, "--untaint", "--run", bad.RunID)
	if code != 0 || !strings.Contains(log, "node "+realNode+": lifted taint gpuvet.io/unhealthy="+bad.RunID+":NoSchedule") {
		t.Errorf("clean --untaint: exit %d:\n%s", code, log)
	}
	n = getNode(t, e.cs, realNode)
	userMarksKept(t, n)
	if tn := gpuvetTaint(n); tn != nil || n.Annotations[k8s.AnnotationUnhealthyReason] != "" || n.Labels[k8s.LabelVettedBy] != good.RunID {
		t.Errorf("after untaint: taint %v, reason %q, labels %v", tn, n.Annotations[k8s.AnnotationUnhealthyReason], n.Labels)
	}
	e.assertNothingLeft(t, state)
}

// TestRealNodeCronJob applies docs/kubernetes-cronjob.yaml as it is (gpuvet's image and the
// node filled in, the textfile directory a temporary one), triggers a Job from the CronJob as
// `kubectl create job --from=cronjob/gpuvet` does, and checks that the in-cluster run (the pod's
// service account, no kubeconfig) vetted the node: the Job succeeded, summary.json and the run's
// outputs are on the PVC, no run manifest is left there, the Prometheus textfile is in the node
// exporter's directory, and the node carries the labels.
//
// What the test control plane lacks, the test supplies as a cluster would: its apiserver listens
// on the namespace's 127.0.0.1 only and the `kubernetes` Service has no endpoints and no proxy, so
// a TLS proxy on the node's address stands in for that Service (KUBERNETES_SERVICE_HOST/PORT, its
// CA in ca.crt); and the ServiceAccount admission plugin is off, so the test adds the projected
// service-account volume it would inject. Only the settings that make it a quick simulated run
// are added to the Job's flags.
func TestRealNodeCronJob(t *testing.T) {
	e := setupReal(t)
	ctx := context.Background()
	b, err := os.ReadFile(k8s.CronJobFile)
	if err != nil {
		t.Fatal(err)
	}
	textfile := t.TempDir()
	doc := strings.NewReplacer("registry.example.com/gpuvet:v0.1.0", realImage,
		"kubernetes.io/hostname: monitoring-node", "kubernetes.io/hostname: "+realNode,
		"/var/lib/node_exporter/textfile_collector", textfile).Replace(string(b))
	objs, err := k8s.DecodeManifests([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	proxy := startAPIProxy(t, e.kubeconfig)
	var cj *batchv1.CronJob
	ns := "gpuvet-system"
	t.Cleanup(func() { e.deleteCronJobObjects(t, objs) })
	for _, o := range objs {
		if c, ok := o.(*batchv1.CronJob); ok {
			cj = c
		}
		if err := e.create(ctx, o); err != nil {
			t.Fatalf("creating %T from %s: %v", o, k8s.CronJobFile, err)
		}
	}
	if cj == nil {
		t.Fatalf("%s has no CronJob", k8s.CronJobFile)
	}
	ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "test-apiserver-ca", Namespace: ns}, Data: map[string]string{"ca.crt": proxy.caPEM}}
	if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, ca, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := e.cs.BatchV1().CronJobs(ns).Get(ctx, cj.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := cur.Spec.JobTemplate.Spec.DeepCopy()
	ps := &spec.Template.Spec
	c := &ps.Containers[0]
	c.Args = append(c.Args, "--engine", "generic", "--engine-cmd", "gpuvet sim --gpu H200 --model {model} --host 0.0.0.0 --port {port}",
		"--health-args", "--sim --sim-count 8 --dcgm=false", "--cache-size", "off", "--gpu-count", "2") // run.parallel_gpus: the default, auto
	c.Args = append(c.Args, quick...)
	c.Env = append(c.Env, corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: proxy.host}, corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: proxy.port})
	exp := int64(3600)
	ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "sa", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &exp}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: ca.Name}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
	}}}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "sa", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
	yes := true
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "gpuvet-manual-" + strconv.FormatInt(time.Now().Unix()%100000, 10), Namespace: ns,
		Annotations:     map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cur.Name, UID: cur.UID, Controller: &yes}}},
		Spec: *spec}
	start := time.Now()
	if _, err := e.cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log, ok := e.waitJob(t, ns, job.Name, 6*time.Minute)
	t.Logf("the CronJob's Job %s: succeeded %v in %s", job.Name, ok, time.Since(start).Round(time.Second))
	if !ok {
		t.Fatalf("the CronJob's Job failed; its pod's log:\n%s", log)
	}
	if !strings.Contains(log, "kubernetes: context in-cluster") {
		t.Errorf("the run did not connect with the in-cluster config:\n%s", log)
	}

	pvc, err := e.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "gpuvet-results", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := e.cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.HostPath == nil {
		t.Fatalf("the results PVC's volume %s: %v (want the test cluster's hostPath PV)", pvc.Spec.VolumeName, err)
	}
	dir := filepath.Join(pv.Spec.HostPath.Path, job.Name)
	s, err := results.Read(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatalf("no summary on the PVC: %v\n%s", err, log)
	}
	if s.Backend != "kubernetes" || !s.Complete || len(s.Hosts) != 1 || s.Hosts[0].Name != realNode || s.Hosts[0].Status == results.StatusFailed {
		t.Fatalf("summary on the PVC: backend %s, complete %v, hosts %+v", s.Backend, s.Complete, s.Hosts)
	}
	for _, f := range []string{"report.html", "junit.xml", "ctrf.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not on the PVC: %v", f, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(pv.Spec.HostPath.Path, "state", "*.json")); len(m) != 0 {
		t.Errorf("run manifests left on the PVC: %v", m)
	}
	prom, err := os.ReadFile(filepath.Join(textfile, "gpuvet.prom"))
	if err != nil || !strings.Contains(string(prom), `run_id="`+s.RunID+`"`) || !strings.Contains(string(prom), `gpuvet_host_status{`) {
		t.Errorf("the node exporter's textfile: %v\n%.600s", err, prom)
	}
	n := getNode(t, e.cs, realNode)
	// auto weighed the load Jobs' CPU need against the node's allocatable CPU, as the kubelet
	// reports it, with the host pipeline's rule.
	cpu := n.Status.Allocatable[corev1.ResourceCPU]
	if p := s.Hosts[0].Parallel; p == nil || p.Mode != "auto" || p.Slots != 2 || p.GPUs < 1 || p.FreeCores != cpu.AsApproximateFloat64() ||
		!strings.Contains(p.CoresSource, "allocatable cpu") {
		t.Errorf("the node's GPUs at once: %+v, want auto over its 2 GPUs from its allocatable cpu %s", p, cpu.String())
	} else {
		t.Logf("GPUs at once on %s: %s", realNode, p.Reason)
	}
	if n.Labels[k8s.LabelStatus] != string(s.Hosts[0].Status) || n.Labels[k8s.LabelVettedBy] != s.RunID || n.Annotations[k8s.AnnotationVettedAt] == "" {
		t.Errorf("the node's labels %v, want status %s of run %s", n.Labels, s.Hosts[0].Status, s.RunID)
	}
	t.Logf("in-cluster run %s: node %s labelled %s, results in %s, textfile %d bytes", s.RunID, realNode, n.Labels[k8s.LabelStatus], dir, len(prom))
}

// create creates one decoded object with the typed client of its kind.
func (e *env) create(ctx context.Context, o runtime.Object) error {
	var err error
	switch o := o.(type) {
	case *corev1.Namespace:
		_, err = e.cs.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ServiceAccount:
		_, err = e.cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRole:
		_, err = e.cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRoleBinding:
		_, err = e.cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
	case *corev1.PersistentVolumeClaim:
		_, err = e.cs.CoreV1().PersistentVolumeClaims(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		_, err = e.cs.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *batchv1.CronJob:
		_, err = e.cs.BatchV1().CronJobs(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *schedulingv1.PriorityClass:
		_, err = e.cs.SchedulingV1().PriorityClasses().Create(ctx, o, metav1.CreateOptions{})
	default:
		return fmt.Errorf("the test does not create a %T", o)
	}
	return err
}

// deleteCronJobObjects removes what the manifest made (the namespace last waited for: its PVC's
// hostPath volume goes with it) and the labels the run put on the node.
func (e *env) deleteCronJobObjects(t *testing.T, objs []runtime.Object) {
	ctx := context.Background()
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			e.cs.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *rbacv1.ClusterRoleBinding:
			e.cs.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *schedulingv1.PriorityClass:
			e.cs.SchedulingV1().PriorityClasses().Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *corev1.Namespace:
			wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			if err := k8s.DeleteNamespace(wctx, e.cs, o.Name); err != nil {
				t.Errorf("namespace %s: %v", o.Name, err)
			}
			cancel()
		}
	}
	setNode(t, e.cs, realNode, func(n *corev1.Node) {
		delete(n.Labels, k8s.LabelStatus)
		delete(n.Labels, k8s.LabelVettedBy)
		delete(n.Annotations, k8s.AnnotationVettedAt)
	})
}

// waitJob waits until a Job succeeds or fails and returns its pod's log.
func (e *env) waitJob(t *testing.T, ns, name string, limit time.Duration) (string, bool) {
	ctx := context.Background()
	deadline := time.Now().Add(limit)
	for {
		j, err := e.cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		done, ok := false, false
		if j != nil {
			for _, c := range j.Status.Conditions {
				if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
					done, ok = true, c.Type == batchv1.JobComplete
				}
			}
		}
		if done || time.Now().After(deadline) {
			return e.jobLog(ctx, ns, name), ok
		}
		time.Sleep(time.Second)
	}
}

func (e *env) jobLog(ctx context.Context, ns, job string) string {
	pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil || len(pods.Items) == 0 {
		return fmt.Sprintf("(no pod: %v)", err)
	}
	var b strings.Builder
	p := pods.Items[0]
	for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, "container %s: ready %v, state %+v\n", st.Name, st.Ready, st.State)
	}
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		raw, err := e.cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
		fmt.Fprintf(&b, "--- %s (%v)\n%s\n", c.Name, err, raw)
	}
	return b.String()
}

// apiProxy is the test's stand-in for the `kubernetes` Service: TLS on the node's address, with a
// certificate of its own CA, forwarding to the apiserver (which checks the pod's token).
type apiProxy struct{ host, port, caPEM string }

func startAPIProxy(t *testing.T, kubeconfig string) apiProxy {
	ip := os.Getenv("GPUVET_TEST_K8S_REAL_NODE_IP")
	if ip == "" {
		ip = "10.89.0.1" // setup.sh's NODE_IP
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpuvet-test-apiserver-ca"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kubernetes"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP(ip)}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("the apiserver proxy cannot listen on the node's address %s: %v (are the tests running inside the node's network namespace?)", ip, err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1                                                                                           // watches and followed logs stream
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true} // as the test kubeconfig does
	srv := &http.Server{Handler: rp, TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: key}}}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	return apiProxy{host: host, port: port, caPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))}
}

// Issue 46's gate on the real node (kubelet + containerd): the node joins with gpuvet's pending
// taint, and the run's own pods tolerate it. Issue 52: a healthy run releases it (pending → vetted
// → released: the taint gone, GPUVetted True, the status label, the run that vetted it, an
// expiry); a GPU 10 % slower than its seven siblings (a straggler, decided by the GPU-to-GPU
// comparison, not by a hard failure) replaces the pending taint with the quarantine, GPUVetted
// False naming the GPU and the comparison; a GPU computing wrong answers does the same.
//
// The runs load the synchronous rung only, one GPU at a time: beside CI's go test (the node's pods
// at a CPU weight of 64) the quick sweep's client fell behind on its constant rungs and left the
// node pending (inconclusive, the gate's answer for a run that could not decide); one stream per
// GPU seldom does, and the engines' comparison keeps a 40 % margin for the same reason. A healthy
// run still undecided is checked as kept pending with its reason, and one of the next two must
// release it (in ci26 a healthy GPU's ITL p95, loaded while the machine was busiest, read 213 %
// above its sibling's: the load Job now reads the node's CPU pressure, and such a tail is the
// host's, undecided, not a flag). The healthy run serves one GPU (its health still benchmarks all
// eight) against a throughput reference, as a calibrated fleet does: the release is what it proves,
// and a second engine only adds a GPU-to-GPU tail comparison that a starved CI machine leaves
// undecided (CI at a53acdb: three healthy runs in a row, the second GPU's ITL p95 43-63 % above the
// first's with the node's CPU pressure at 39-82 %). One GPU with neither a peer nor a reference is
// rightly undecided (its throughput judged by nothing). The straggler and corruption runs below
// keep two GPUs. The straggler is
// slow in its microbenchmarks (the simulator's --sim-straggler in the health Job), compared at a
// 5 % tolerance (compare.gemm_variance_pct; 25 % by default, the spread measured between healthy
// H200s), which the simulator's healthy GPUs meet within 1 %.
func TestRealNodeGate(t *testing.T) {
	e := setupReal(t)
	markNodes(t, e.cs, realNode)
	pendingOn(t, e.cs, realNode)
	t.Cleanup(func() {
		setNode(t, e.cs, realNode, func(no *corev1.Node) {
			no.Spec.Taints = withoutKeys(no.Spec.Taints, k8s.TaintPending, k8s.TaintUnhealthy)
		})
	})
	state := t.TempDir()
	run := func(gpus, healthArgs string, extra ...string) (*results.Summary, string) {
		out := t.TempDir()
		args := append([]string{"--cache-size", "off", "--gpu-count", gpus, "--health-args", healthArgs, "--gate", "--label-nodes", "--acceptance"}, extra...)
		log, code := e.gpuvet(t, state, e.realArgs(out, "", args...)...)
		s, err := results.Read(filepath.Join(out, "summary.json"))
		if err != nil || len(s.Hosts) != 1 {
			t.Fatalf("exit %d, summary %v:\n%s", code, err, log)
		}
		return s, log
	}
	light := []string{"--set", "load.profile=synchronous", "--set", "compare.variance_pct=40", "--parallel-gpus", "1"}
	var s *results.Summary
	var log string
	var n *corev1.Node
	var c *corev1.NodeCondition
	for try := 1; ; try++ {
		s, log = run("1", "--sim --sim-count 8 --dcgm=false", append(light, "--set", "reference.NVIDIA H200.Qwen/Qwen3-8B.min_throughput_req_s=0.2")...)
		n = getNode(t, e.cs, realNode)
		userMarksKept(t, n)
		c = vetted(n)
		if s.Hosts[0].Status != results.StatusInconclusive || try == 3 {
			break
		}
		// Undecided (a starved machine): the gate keeps it pending and says why; the next run decides.
		_, why, _ := strings.Cut(n.Annotations[k8s.AnnotationPendingReason], " in a row): ")
		if !hasPending(n) || c == nil || c.Status != corev1.ConditionUnknown || strings.TrimSpace(why) == "" {
			t.Fatalf("undecided node not kept pending with its reason: taints %v annotations %v condition %+v\n%s", n.Spec.Taints, n.Annotations, c, log)
		}
		t.Logf("healthy run %s undecided, kept pending: %s", s.RunID, why)
	}
	if st := s.Hosts[0].Status; st != results.StatusOK || hasPending(n) || gpuvetTaint(n) != nil || c == nil || c.Status != corev1.ConditionTrue ||
		n.Annotations[k8s.AnnotationValidUntil] == "" || n.Labels[k8s.LabelStatus] != string(results.StatusOK) || n.Labels[k8s.LabelVettedBy] != s.RunID {
		t.Fatalf("a healthy node not released: %s, taints %v labels %v annotations %v condition %+v\n%s", st, n.Spec.Taints, n.Labels, n.Annotations, c, log)
	}
	t.Logf("healthy run %s: released, %s until %s", s.RunID, c.Reason, n.Annotations[k8s.AnnotationValidUntil])

	pendingOn(t, e.cs, realNode)
	s, log = run("2", "--sim --sim-count 8 --dcgm=false --sim-straggler 1 --sim-straggler-pct 10", append(light, "--set", "compare.gemm_variance_pct=5")...)
	n = getNode(t, e.cs, realNode)
	userMarksKept(t, n)
	c = vetted(n)
	if s.Hosts[0].Status != results.StatusFlag || hasPending(n) || gpuvetTaint(n) == nil || c == nil || c.Status != corev1.ConditionFalse ||
		!strings.Contains(c.Message, "gpu 1") || !strings.Contains(c.Message, "below the best") || !strings.Contains(n.Annotations[k8s.AnnotationUnhealthyReason], "tolerance") {
		t.Fatalf("a 10 %% straggler: node %s, taints %v, condition %+v, annotations %v\n%s", s.Hosts[0].Status, n.Spec.Taints, c, n.Annotations, log)
	}
	t.Logf("straggler run %s: quarantined: %s", s.RunID, c.Message)

	pendingOn(t, e.cs, realNode)
	s, log = run("2", "--sim --sim-count 8 --dcgm=false --sim-corrupt 1", light...)
	n = getNode(t, e.cs, realNode)
	userMarksKept(t, n)
	c = vetted(n)
	if s.Hosts[0].Status != results.StatusFailed || hasPending(n) || gpuvetTaint(n) == nil || c == nil || c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "gpu 1") {
		t.Fatalf("a GPU computing wrong answers: node %s, taints %v, condition %+v\n%s", s.Hosts[0].Status, n.Spec.Taints, c, log)
	}
	e.assertNothingLeft(t, state)
}

// Issue 52's straggler node: the real node's eight GPUs are all 10 % slow (the simulator's
// --sim-node-slowdown-pct in its health Job: a node power-capped or clocked down), which no GPU-to-GPU
// comparison on the node can see. Beside it a sibling node of the same control plane (a kwok node
// whose pods the stand-in kubelet plays, its health Job without the slowdown), both joining pending:
// the gate quarantines the real node on the node-to-node comparison (GPUVetted False, the reason
// naming it) and releases the sibling, or keeps it pending with its reason when its run could not decide.
func TestRealNodeGateSlowBesideSibling(t *testing.T) {
	e := setupReal(t)
	const sibling = "kwok-gpu-sibling"
	addSiblingNode(t, e, sibling)
	e.standIn(t, func(k *standInKubelet) { k.fastNode = sibling })
	markNodes(t, e.cs, realNode, sibling)
	pendingOn(t, e.cs, realNode, sibling)
	t.Cleanup(func() {
		setNode(t, e.cs, realNode, func(no *corev1.Node) {
			no.Spec.Taints = withoutKeys(no.Spec.Taints, k8s.TaintPending, k8s.TaintUnhealthy)
		})
	})
	out, state := t.TempDir(), t.TempDir()
	args := []string{"--cache-size", "off", "--gpu-count", "2", "--health-args", "--sim --sim-count 8 --dcgm=false --sim-node-slowdown-pct 10",
		"--gate", "--label-nodes", "--acceptance", "--set", "load.profile=synchronous", "--set", "compare.variance_pct=40",
		"--parallel-gpus", "1", "--set", "compare.gemm_variance_pct=5"}
	log, code := e.gpuvet(t, state, e.realArgs(out, "", args...)...)
	s, err := results.Read(filepath.Join(out, "summary.json"))
	if err != nil || len(s.Hosts) != 2 {
		t.Fatalf("exit %d, summary %v:\n%s", code, err, log)
	}
	slow, sib := getNode(t, e.cs, realNode), getNode(t, e.cs, sibling)
	userMarksKept(t, slow)
	userMarksKept(t, sib)
	c := vetted(slow)
	if hasPending(slow) || gpuvetTaint(slow) == nil || c == nil || c.Status != corev1.ConditionFalse ||
		!strings.Contains(c.Message, judge.CheckNodeToNode) || !strings.Contains(c.Message, "below the best") {
		t.Fatalf("the slow node: taints %v, condition %+v, annotations %v\n%s", slow.Spec.Taints, c, slow.Annotations, log)
	}
	t.Logf("slow node %s: quarantined: %s", realNode, c.Message)
	sc := vetted(sib)
	switch {
	case gpuvetTaint(sib) != nil || sc == nil || sc.Status == corev1.ConditionFalse:
		t.Errorf("the sibling quarantined: taints %v, condition %+v\n%s", sib.Spec.Taints, sc, log)
	case sc.Status == corev1.ConditionTrue && !hasPending(sib):
		t.Logf("sibling %s: released, %s", sibling, sc.Message)
	case sc.Status == corev1.ConditionUnknown && hasPending(sib) && sib.Annotations[k8s.AnnotationPendingReason] != "":
		t.Logf("sibling %s: undecided, kept pending: %s", sibling, sib.Annotations[k8s.AnnotationPendingReason])
	default:
		t.Errorf("the sibling neither released nor kept pending with a reason: taints %v, condition %+v, annotations %v\n%s", sib.Spec.Taints, sc, sib.Annotations, log)
	}
	if code != 1 || !strings.Contains(log, realNode) {
		t.Errorf("--acceptance with a quarantined node: exit %d, want 1:\n%s", code, log)
	}
	e.assertNothingLeft(t, state)
}

// addSiblingNode adds a kwok GPU node (8 nvidia.com/gpu, an H200's labels) beside the real one,
// Ready once kwok has taken it, and removes it when the test ends.
func addSiblingNode(t *testing.T, e *env, name string) {
	ctx := context.Background()
	gpus := resource.MustParse("8")
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110"), k8s.GPUResource: gpus}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true",
			"nvidia.com/gpu.product": "NVIDIA-H200"}},
		Status: corev1.NodeStatus{Allocatable: res, Capacity: res}}
	if _, err := e.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the sibling node: %v", err)
	}
	t.Cleanup(func() { _ = e.cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		got := getNode(t, e.cs, name)
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sibling node %s not Ready within a minute (is kwok running beside the real node's control plane?): %+v", name, got.Status.Conditions)
		}
	}
}
