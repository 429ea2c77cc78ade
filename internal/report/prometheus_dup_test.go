package report

import (
	"sort"
	"strings"
	"testing"
)

// A series is written once: node-exporter's textfile collector refuses the whole file when two
// samples share a name and labels ("collected before with the same name and label values"). A
// model listed twice in the config (models: [m, m]) is served twice on the host, its status and
// endpoints then twice in the summary.
func TestPrometheusNoDuplicateSeries(t *testing.T) {
	s := readSample(t)
	h := &s.Hosts[0]
	h.Models = append(h.Models, h.Models[0])
	b, err := Prometheus(s)
	if err != nil {
		t.Fatal(err)
	}
	noDuplicateSeries(t, b)
}

func noDuplicateSeries(t *testing.T, b []byte) {
	t.Helper()
	seen := map[string]bool{}
	for name, f := range parseProm(t, b) {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			key := name + "{" + strings.Join(ls, ",") + "}"
			if seen[key] {
				t.Errorf("series written twice: %s", key)
			}
			seen[key] = true
		}
	}
}
