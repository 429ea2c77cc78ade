package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// failingHost measured part of a run, then broke.
type failingHost struct{ testHost }

func (h *failingHost) Run(ctx context.Context) (*results.Summary, error) {
	return h.sum, errors.New("engine never answered")
}

// nestedBackend is a nested run's backend: it sees the outer run's RunInfo and stamps what it
// finishes.
type nestedBackend struct {
	testBackend
	got      RunInfo
	finished bool
}

func (b *nestedBackend) Hosts(_ context.Context, r RunInfo) ([]Host, []results.SkippedHost, error) {
	b.got = r
	return b.hosts, []results.SkippedHost{{Name: "n4", Reason: "no GPU"}}, nil
}
func (b *nestedBackend) Finish(s *results.Summary) { b.finished, s.Environment = true, "baremetal" }

// A fleet run inside another: the outer run's id and manifest, hosts merged (the one that broke is
// failed and says where), the backend's Finish, judged node to node, written to r.Out/summary.json;
// no manifest, started summary or history of its own.
func TestNested(t *testing.T) {
	p := testPlan(t)
	state, err := StateDir()
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewManifest(state, "opennebula", "outer-run", nil)
	if err != nil {
		t.Fatal(err)
	}
	n1 := &testHost{name: "n1", sum: withGPUs(oneHost(healthy(), healthy()), 2)}
	n2 := &failingHost{testHost{name: "n2", sum: withGPUs(oneHost(healthy()), 1)}}
	n3 := &testHost{name: "n3", sum: withGPUs(oneHost(healthy(), healthy()), 2)}
	b := &nestedBackend{testBackend: testBackend{hosts: []Host{n1, n2, n3}, cleanup: 20 * time.Minute}}
	var lines []string
	r := RunInfo{ID: "outer-run", Out: filepath.Join(p.Config.Output.Dir, "baremetal"), Manifest: m, ToolVersion: "v9",
		Say: func(l string) { lines = append(lines, "bare-metal "+l) }}
	s, outs, err := Nested(context.Background(), p, b, r)
	if err != nil {
		t.Fatal(err)
	}
	if b.got.ID != "outer-run" || b.got.Manifest != m || !b.finished || n1.deadline < 19*time.Minute {
		t.Fatalf("backend got run %q, manifest %p (want %p), finished %v, cleanup limit %s", b.got.ID, b.got.Manifest, m, b.finished, n1.deadline)
	}
	if len(outs) != 3 || outs[1].Err == nil || outs[0].Err != nil {
		t.Fatalf("outcomes %+v", outs)
	}
	written, err := results.Read(filepath.Join(r.Out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []*results.Summary{s, written} {
		st := map[string]results.Host{}
		for _, h := range got.Hosts {
			st[h.Name] = h
		}
		if got.RunID != "outer-run" || got.Tool.Version != "v9" || got.Environment != "baremetal" || !got.Complete || len(got.Hosts) != 3 {
			t.Fatalf("summary run %q tool %q env %q complete %v hosts %d", got.RunID, got.Tool.Version, got.Environment, got.Complete, len(got.Hosts))
		}
		if h := st["n2"]; h.Status != results.StatusFailed || !strings.Contains(h.Error, "run failed: engine never answered") {
			t.Fatalf("n2: %s %q", h.Status, h.Error)
		}
		// Judged: only the judge sets a host's status, and node to node only judge.Fleet compares.
		if st["n1"].Status == "" || st["n1"].Status == results.StatusFailed || got.Fleet == nil || len(got.Fleet.Comparisons) == 0 {
			t.Fatalf("not judged: n1 %q, fleet %+v", st["n1"].Status, got.Fleet)
		}
		if len(got.Fleet.Skipped) != 1 || got.History != nil {
			t.Fatalf("skipped %+v, history %+v (a nested run reads none)", got.Fleet.Skipped, got.History)
		}
	}
	// What the caller may take as figures: the hosts whose run finished, their status their own.
	ok := Succeeded(s, outs)
	if ok == nil || len(ok.Hosts) != 2 || ok.Hosts[0].Name != "n1" || ok.Hosts[1].Name != "n3" || ok.Status == results.StatusFailed || s.Status != results.StatusFailed {
		t.Fatalf("succeeded: %+v (run status %s)", ok, s.Status)
	}
	if Succeeded(s, outs[1:2]) != nil {
		t.Fatal("a run whose every host broke has no hosts that succeeded")
	}
	if !strings.Contains(strings.Join(lines, "\n"), "bare-metal n2: FAILED in run") {
		t.Fatalf("progress:\n%s", strings.Join(lines, "\n"))
	}
	if ms, _ := Manifests(state, "", ""); len(ms) != 1 || ms[0].Path() != m.Path() {
		t.Fatalf("%d manifests: a nested run makes none of its own", len(ms))
	}
	if _, err := os.Stat(filepath.Join(p.Config.Output.Dir, "summary.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the outer run's summary.json was written by the nested run: %v", err)
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
}

// A backend's bad input ends a nested run before anything starts, as it ends Execute.
func TestNestedInputError(t *testing.T) {
	p := testPlan(t)
	_, _, err := Nested(context.Background(), p, badHostsBackend{}, RunInfo{ID: "x", Out: t.TempDir()})
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("err %v: want an *InputError", err)
	}
}

type badHostsBackend struct{ testBackend }

func (badHostsBackend) Hosts(context.Context, RunInfo) ([]Host, []results.SkippedHost, error) {
	return nil, nil, errors.New("node1: no such host")
}
