package k8s

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/gpuvet/gpuvet/internal/config"
)

// CronJobFile is the periodic-vetting manifest docs/kubernetes.md gives; the real-node test
// applies it, so the page and what was run cannot drift.
const CronJobFile = "../../docs/kubernetes-cronjob.yaml"

// DecodeManifests decodes a multi-document YAML file of Kubernetes objects into typed objects.
func DecodeManifests(b []byte) ([]runtime.Object, error) {
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []runtime.Object
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
}

func stripComments(doc []byte) []byte {
	var keep [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			keep = append(keep, l)
		}
	}
	return bytes.Join(keep, []byte("\n"))
}

// The CronJob's ClusterRole grants every permission a run with the kept cache, --label-nodes and
// --taint-failed asks for (the preflight would stop it otherwise) and nothing else but the
// optional events list; its ConfigMap is a valid gpuvet config asking for labels, taints and the
// textfile; its Job runs `gpuvet run --backend kubernetes` without a kubeconfig (in-cluster).
func TestCronJobManifest(t *testing.T) {
	b, err := os.ReadFile(CronJobFile)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeManifests(b)
	if err != nil {
		t.Fatalf("%s: %v", CronJobFile, err)
	}
	granted := map[string]bool{}
	var cj *batchv1.CronJob
	var cm *corev1.ConfigMap
	var pc *schedulingv1.PriorityClass
	for _, o := range objs {
		switch o := o.(type) {
		case *schedulingv1.PriorityClass:
			pc = o
		case *rbacv1.ClusterRole:
			for _, r := range o.Rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							granted[v+" "+res+"."+g] = true
						}
					}
				}
			}
		case *batchv1.CronJob:
			cj = o
		case *corev1.ConfigMap:
			cm = o
		}
	}
	if cj == nil || cm == nil || len(granted) == 0 {
		t.Fatalf("%s lacks the CronJob, ConfigMap or ClusterRole (%d objects)", CronJobFile, len(objs))
	}
	key := func(p Permission) string {
		r := p.Resource
		if p.Subresource != "" {
			r += "/" + p.Subresource
		}
		return p.Verb + " " + r + "." + p.Group
	}
	needs := append(Needs(true, false, false, true), Verdicts{Label: true, TaintFailed: true}.Needs()...)
	needs = append(needs, DeviceNeeds()...) // optional: a failed GPU taken alone
	var asked []string
	for _, p := range needs {
		asked = append(asked, key(p))
		if !granted[key(p)] {
			t.Errorf("the ClusterRole lacks %s, which a run asks for", p)
		}
	}
	for g := range granted {
		// Events are optional (a refused pod's reason), read through a watch: list and watch.
		if !slices.Contains(asked, g) && g != "list events." && g != "watch events." {
			t.Errorf("the ClusterRole grants %s, which no run asks for", g)
		}
	}
	f := filepath.Join(t.TempDir(), "gpuvet.yaml")
	if err := os.WriteFile(f, []byte(cm.Data["gpuvet.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(config.Options{Files: []string{f}, Sets: []string{"backend=kubernetes"}})
	if err != nil {
		t.Fatalf("the ConfigMap's gpuvet.yaml: %v", err)
	}
	if k := p.Config.Kubernetes; !k.LabelNodes || !k.TaintFailed || k.Kubeconfig != "" || p.Config.Output.PrometheusFile != "/textfile/gpuvet.prom" {
		t.Errorf("the ConfigMap's settings: %+v, prometheus_file %q", k, p.Config.Output.PrometheusFile)
	}
	c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	if !strings.HasPrefix(args, "run --backend kubernetes -c /config/gpuvet.yaml") || strings.Contains(args, "kubeconfig") || cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("the CronJob's run: %q, concurrency %s", args, cj.Spec.ConcurrencyPolicy)
	}
	// Real work preempts a vetting run, and the run preempts nothing: its own pod and every pod it
	// creates (kubernetes.priority_class) sit below the default priority (0).
	if pc == nil || pc.Value >= 0 || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != corev1.PreemptNever || pc.GlobalDefault ||
		cj.Spec.JobTemplate.Spec.Template.Spec.PriorityClassName != pc.Name || p.Config.Kubernetes.PriorityClass != pc.Name || !p.Config.Kubernetes.Gate {
		t.Errorf("priority: class %+v, the CronJob's pod %q, the run's pods %q, gate %v", pc, cj.Spec.JobTemplate.Spec.Template.Spec.PriorityClassName,
			p.Config.Kubernetes.PriorityClass, p.Config.Kubernetes.Gate)
	}
}
