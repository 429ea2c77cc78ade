package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/k8s/kwokplayer"
)

// TestScale is the harness at CI size (GPUVET_TEST_K8S_SCALE_NODES nodes × 8 GPUs, 64 at once:
// 200 in .ci/run, 50 when unset): the real `gpuvet run --backend kubernetes --gate --taint-failed
// --max-unhealthy 10%` on a fleet that joined pending, where 40 % of the nodes fail (their health
// Job, and the node whose engines never became Ready), must name the straggler (flag) and every
// failed node (failed), and no other; its circuit breaker must stop at its limit (exactly 10 % of
// the nodes carry the quarantine taint on their Node objects, the other failed nodes and the
// straggler are held in fleet.node_actions, untainted and still pending), every ok node must be
// released, and the run exit 1 naming the breaker; and `gpuvet clean` after a
// kill -9 of a run on every node must leave nothing. Figures are logged, not asserted (they are
// the bench's: go run ./bench/k8sscale).
func TestScale(t *testing.T) {
	kc := os.Getenv("GPUVET_TEST_K8S_SCALE_KUBECONFIG")
	if kc == "" {
		t.Skip("no scale control plane: start one with `sudo bash bench/k8sscale/cluster.sh start` and run this test inside its network namespace: " +
			"`sudo bash bench/k8sscale/cluster.sh exec env GPUVET_TEST_K8S_SCALE_KUBECONFIG=$HOME/.cache/k8s-scale/run/kubeconfig go test -run TestScale ./bench/k8sscale/` (.ci/run does)")
	}
	n := 50
	if s := os.Getenv("GPUVET_TEST_K8S_SCALE_NODES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 8 {
			t.Fatalf("GPUVET_TEST_K8S_SCALE_NODES=%q: want a count ≥ 8", s)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpuvet")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/gpuvet").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := config{Kubeconfig: kc, Nodes: n, ParallelNodes: 64, QPS: 200, Burst: 400, Gpuvet: bin, Dir: dir, ReadyTimeout: 30 * time.Second,
		Pace: kwokplayer.DefaultPace, KillAfter: 0.3, FailShare: 0.4, MaxUnhealthyPct: 10, Gate: true, Log: testLog{t}}
	r, err := measure(ctx, c)
	if r != nil {
		var b strings.Builder
		r.fprint(&b, c)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Problems {
		t.Errorf("the run named the wrong nodes: %s", p)
	}
	if r.Breaker == nil {
		t.Error("the circuit breaker was not checked")
	}
	for _, w := range r.BreakerWrong {
		t.Errorf("circuit breaker: %s", w)
	}
	for _, l := range r.Left {
		t.Errorf("gpuvet clean after kill -9 left %s", l)
	}
	for _, e := range r.PlayerErrors {
		t.Errorf("player: %s", e)
	}
	if r.KilledAt == 0 {
		t.Error("the kill -9 run was not killed mid-run")
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
