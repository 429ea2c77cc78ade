package config

import (
	"strings"
	"testing"
)

// output.prometheus_file must be a *.prom file (the only files node exporter's textfile collector
// reads), and stays on this machine: the hosts' plan does not carry it. The verdict keys load.
func TestPrometheusFileAndVerdictKeys(t *testing.T) {
	for _, bad := range []string{"/var/lib/node_exporter/textfile_collector/gpuvet.txt", "/textfile/", "/textfile/.prom"} {
		_, err := Load(Options{Sets: []string{"output.prometheus_file=" + bad}})
		if err == nil || !strings.Contains(err.Error(), "output.prometheus_file") || !strings.Contains(err.Error(), ".prom") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	p, err := Load(Options{Sets: []string{"backend=kubernetes", "kubernetes.image=img", "output.prometheus_file=/textfile/gpuvet.prom",
		"kubernetes.label_nodes=true", "kubernetes.taint_failed=true", "kubernetes.taint_flagged=true"}})
	if err != nil {
		t.Fatal(err)
	}
	if k := p.Config.Kubernetes; !k.LabelNodes || !k.TaintFailed || !k.TaintFlagged || p.Config.Output.PrometheusFile != "/textfile/gpuvet.prom" {
		t.Errorf("keys: %+v, %q", k, p.Config.Output.PrometheusFile)
	}
	b, err := p.RemoteYAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, local := range []string{"/textfile/gpuvet.prom", "label_nodes: true", "taint_failed: true"} {
		if strings.Contains(string(b), local) {
			t.Errorf("the hosts' plan carries %q", local)
		}
	}
}
