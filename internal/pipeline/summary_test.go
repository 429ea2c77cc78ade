package pipeline

import (
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
)

// One identity for every summary: the backend's environment when the key is left at its default,
// the user's when set; the plan's meta with its sources.
func TestNewSummaryIdentity(t *testing.T) {
	const one, tid = "opennebula.endpoint=http://127.0.0.1:2633/RPC2", "opennebula.template_id=42"
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"backend=sim"}, "baremetal"},
		{[]string{"backend=opennebula", one, tid}, "vm"},
		{[]string{"backend=kubernetes", "kubernetes.image=r/gpuvet:1"}, "k8s"},
		{[]string{"backend=opennebula", one, tid, "environment=baremetal"}, "baremetal"},
		{[]string{"backend=kubernetes", "kubernetes.image=r/gpuvet:1", "environment=vm"}, "vm"},
	} {
		p, err := config.Load(config.Options{Sets: tc.sets})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Unix(1e9, 0).UTC()
		s := NewSummary(p, "RUN", start, "v9")
		if s.Environment != tc.want || s.RunID != "RUN" || !s.StartedAt.Equal(start) || s.Tool.Name != "gpuvet" || s.Tool.Version != "v9" ||
			s.Backend != p.Config.Backend || s.Meta.LoadProfile == nil || len(s.Meta.Thresholds) == 0 || len(s.Meta.Settings) == 0 {
			t.Errorf("%v: %+v", tc.sets, s)
		}
	}
}
