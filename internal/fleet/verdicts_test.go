package fleet

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// verdictBackend records the host statuses its ApplyVerdicts saw (fleet.Verdicter).
type verdictBackend struct {
	testBackend
	seen  map[string]results.Status
	calls int
	err   error
}

func (b *verdictBackend) ApplyVerdicts(_ context.Context, s *results.Summary) error {
	b.calls++
	b.seen = map[string]results.Status{}
	for _, h := range s.Hosts {
		b.seen[h.Name] = h.Status
	}
	return b.err
}

// okHost is a host summary whose own (in-pod) judgement was ok.
func okHost(ps ...perf) *results.Summary {
	s := withGPUs(oneHost(ps...), len(ps))
	s.Hosts[0].Status = results.StatusOK
	s.Status = results.StatusOK
	return s
}

// A backend that acts on verdicts (Kubernetes labels) sees each host's final status: after node to
// node and the fleet judge, so a node that was ok on its own but is the fleet's straggler is flag.
func TestExecuteVerdicterSeesJudgedStatus(t *testing.T) {
	p := testPlan(t)
	slow := healthy().scaled(0.3)
	b := &verdictBackend{testBackend: testBackend{hosts: []Host{
		&testHost{name: "a", sum: okHost(healthy(), healthy())},
		&testHost{name: "b", sum: okHost(slow, slow)},
		&testHost{name: "c", sum: okHost(healthy(), healthy())},
	}}}
	var out, errOut bytes.Buffer
	if err := Execute(context.Background(), p, b, ExecOptions{Stdout: &out, Stderr: &errOut}); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if b.calls != 1 {
		t.Fatalf("ApplyVerdicts called %d times, want once", b.calls)
	}
	if b.seen["b"] != results.StatusFlag || b.seen["a"] == results.StatusFlag || b.seen["c"] == results.StatusFlag {
		t.Errorf("statuses seen %v: want the straggler b flag (node to node), a and c not", b.seen)
	}
	s, err := results.Read(filepath.Join(p.Config.Output.Dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Hosts {
		if b.seen[h.Name] != h.Status {
			t.Errorf("host %s: verdict written %s, summary.json says %s", h.Name, b.seen[h.Name], h.Status)
		}
	}
}

// Verdicts that could not be written are a caveat and fail the run; an interrupted run writes none.
func TestExecuteVerdicterErrorAndInterrupt(t *testing.T) {
	p := testPlan(t)
	b := &verdictBackend{testBackend: testBackend{hosts: []Host{&testHost{name: "a", sum: okHost(healthy())}}}, err: errors.New("node a: forbidden")}
	var out, errOut bytes.Buffer
	err := Execute(context.Background(), p, b, ExecOptions{Stdout: &out, Stderr: &errOut})
	if err == nil || !strings.Contains(err.Error(), "verdicts were not all written: node a: forbidden") {
		t.Fatalf("err %v, want the verdicts' error", err)
	}
	s, rerr := results.Read(filepath.Join(p.Config.Output.Dir, "summary.json"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !strings.Contains(strings.Join(s.Caveats, "\n"), "VERDICTS NOT WRITTEN: node a: forbidden") {
		t.Errorf("caveats %q", s.Caveats)
	}

	p = testPlan(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	bi := &verdictBackend{testBackend: testBackend{hosts: []Host{&testHost{name: "a", sum: okHost(healthy()), block: true}}}}
	if err := Execute(ctx, p, bi, ExecOptions{Stdout: &out, Stderr: &errOut}); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err %v", err)
	}
	if bi.calls != 0 {
		t.Errorf("an interrupted run wrote verdicts (%v)", bi.seen)
	}
}
