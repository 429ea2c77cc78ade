// Command k8sscale runs the real `gpuvet run --backend kubernetes` on N kwok GPU nodes × 8 GPUs
// (issue 31, docs/k8s-scale.md), each node played by internal/k8s/kwokplayer from recorded in-pod
// results (one node 15 % slower, one whose engines never become Ready, and 40 % of the nodes
// failing with them: their health Job fails), with --taint-failed --max-unhealthy 10% (issue 46's
// circuit breaker), and prints: the wall time and what it adds beyond one node's own time, gpuvet's
// peak RSS, the API requests per node (the API server's counters: every client, and gpuvet's own
// by its FlowSchema; gpuvet's own count from summary.json), the nodes named and whether they are
// the right ones, what the breaker tainted and held (read from the Node objects), summary.json's
// size, and `gpuvet clean` after a kill -9 of a run at that scale.
//
// It needs a control plane of its own, in a network namespace (bench/k8sscale/cluster.sh):
//
//	sudo bash bench/k8sscale/cluster.sh start
//	sudo bash bench/k8sscale/cluster.sh exec go run ./bench/k8sscale -nodes 200
//	sudo bash bench/k8sscale/cluster.sh exec go run ./bench/k8sscale -nodes 1000 -keep /tmp/scale-1000
//	sudo bash bench/k8sscale/cluster.sh stop
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuvet/gpuvet/internal/k8s/kwokplayer"
)

func main() {
	c := config{Log: os.Stderr}
	home, _ := os.UserHomeDir()
	flag.StringVar(&c.Kubeconfig, "kubeconfig", filepath.Join(home, ".cache/k8s-scale/run/kubeconfig"), "the harness control plane's admin kubeconfig (cluster.sh start)")
	flag.IntVar(&c.Nodes, "nodes", 200, "kwok GPU nodes × 8 GPUs")
	flag.IntVar(&c.ParallelNodes, "parallel-nodes", 64, "gpuvet's --parallel-nodes")
	flag.Float64Var(&c.QPS, "qps", 50, "gpuvet's kubernetes.qps (0: not given, for a gpuvet without the key)")
	flag.IntVar(&c.Burst, "burst", 100, "gpuvet's kubernetes.burst")
	flag.StringVar(&c.Gpuvet, "gpuvet", "", "gpuvet binary (default: built from this checkout)")
	flag.DurationVar(&c.ReadyTimeout, "ready-timeout", 60*time.Second, "engine.ready_timeout (the never-ready node fails after it)")
	flag.Float64Var(&c.KillAfter, "kill-after", 0.3, "the kill -9 run is killed once this share of the nodes started (0: no kill run)")
	flag.Float64Var(&c.FailShare, "fail-share", 0.4, "this share of the nodes fail in the N-node run (0: one failed node)")
	flag.Float64Var(&c.MaxUnhealthyPct, "max-unhealthy", 10, "the N-node run passes --taint-failed --max-unhealthy this % and the breaker is checked (0: no verdicts written)")
	flag.BoolVar(&c.Gate, "gate", true, "with -max-unhealthy: the N-node run's nodes join pending and it passes --gate (the acceptance gate): ok nodes must be released, failed and flagged ones quarantined or held")
	keep := flag.String("keep", "", "keep the outputs (summary.json, report.html, logs) in this folder")
	runs := flag.String("runs", "one,all,kill", "which runs, comma-separated: one (a 1-node run), all (the N-node run), kill (kill -9 of an N-node run, then gpuvet clean)")
	flag.BoolVar(&c.Verbose, "v", false, "show gpuvet's progress")
	flag.Parse()
	if c.Runs = map[string]bool{}; *runs != "" {
		for _, r := range strings.Split(*runs, ",") {
			if r != "one" && r != "all" && r != "kill" {
				fmt.Fprintf(os.Stderr, "k8sscale: -runs: want one, all or kill, comma-separated; got %q\n", r)
				os.Exit(2)
			}
			c.Runs[r] = true
		}
	}
	c.Pace = kwokplayer.DefaultPace
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "k8sscale:", err)
		os.Exit(1)
	}
}

// report is what one harness run measured.
type report struct {
	Nodes          int
	One, All       *outcome
	Injected       injected
	Problems       []string
	Breaker        *breakerOutcome
	BreakerWrong   []string
	KilledAt, Pods int
	CleanTook      time.Duration
	Left           []string
	Played         map[string]int64
	PlayerErrors   []string
}

func run(ctx context.Context, c config, keep string) error {
	var err error
	if c.Dir = keep; c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "gpuvet-k8sscale-"); err != nil {
			return err
		}
		defer os.RemoveAll(c.Dir)
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	r, err := measure(ctx, c)
	if r != nil {
		r.fprint(os.Stdout, c)
	}
	if err != nil {
		return err
	}
	if len(r.Problems) > 0 || len(r.BreakerWrong) > 0 || len(r.Left) > 0 {
		return fmt.Errorf("%d problem(s), %d with the circuit breaker, %d leftover(s)", len(r.Problems), len(r.BreakerWrong), len(r.Left))
	}
	return nil
}

// measure sets the cluster up, plays it, and runs gpuvet on one node, on all, and killed.
func measure(ctx context.Context, c config) (*report, error) {
	cl, err := connect(c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (start the control plane with bench/k8sscale/cluster.sh start, and run this inside its netns: cluster.sh exec …)", c.Kubeconfig, err)
	}
	if c.Gpuvet == "" {
		c.Gpuvet = filepath.Join(c.Dir, "gpuvet")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", c.Gpuvet, "./cmd/gpuvet").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build ./cmd/gpuvet (run from the repository's root): %w\n%s", err, out)
		}
	}
	t0 := time.Now()
	if err := cl.ensureNodes(ctx, c.Nodes); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.Log, "%d kwok GPU nodes Ready (%.1fs)\n", c.Nodes, time.Since(t0).Seconds())
	if n, err := cl.resetVerdicts(ctx); err != nil { // an earlier run's on this control plane
		return nil, err
	} else if n > 0 {
		fmt.Fprintf(c.Log, "took an earlier run's gpuvet.io/ marks off %d node(s)\n", n)
	}
	kc, err := cl.gpuvetKubeconfig(ctx, c.Dir)
	if err != nil {
		return nil, fmt.Errorf("gpuvet's user and FlowSchema: %w", err)
	}
	r := &report{Nodes: c.Nodes, Injected: injectedFor(c.Nodes, c.FailShare)}
	var perrs []string
	var pmu sync.Mutex
	pctx, stopPlayer := context.WithCancel(ctx)
	defer stopPlayer()
	p, err := kwokplayer.New(kwokplayer.Options{Client: cl.cs, Dynamic: cl.dyn, LogDir: filepath.Join(c.Dir, "pod-logs"), Pace: c.Pace,
		Straggler: r.Injected.Straggler, Slowdown: 0.15, FailJobs: r.Injected.Failed, NeverReady: r.Injected.NeverReady, Jitter: 0.005,
		Errorf: func(f string, a ...any) { pmu.Lock(); perrs = append(perrs, fmt.Sprintf(f, a...)); pmu.Unlock() }})
	if err != nil {
		return nil, err
	}
	if err := p.Run(pctx); err != nil {
		return nil, err
	}
	go cl.keepAddresses(pctx, func(f string, a ...any) { fmt.Fprintf(c.Log, f+"\n", a...) })
	collect := func() {
		pmu.Lock()
		defer pmu.Unlock()
		r.Played, r.PlayerErrors = p.Played(), append([]string(nil), perrs...)
	}
	defer collect()
	// One node's own time: a run on one healthy node (kwok-gpu-0, first by name).
	if c.wants("one") {
		fmt.Fprintf(c.Log, "one node …\n")
		if r.One, err = c.runGpuvet(ctx, cl, kc, "one", 1, nil); err != nil {
			return r, err
		}
	}
	if c.wants("all") {
		if c.Gate && c.MaxUnhealthyPct > 0 {
			if err := cl.markPending(ctx, c.Nodes); err != nil {
				return r, fmt.Errorf("the nodes' pending taint: %w", err)
			}
		}
		fmt.Fprintf(c.Log, "%d nodes at %d at once …\n", c.Nodes, c.ParallelNodes)
		if r.All, err = c.runGpuvet(ctx, cl, kc, "all", c.Nodes, nil); err != nil {
			return r, err
		}
		r.Problems = check(r.All.Summary, r.Injected, c.Nodes)
		if c.MaxUnhealthyPct > 0 {
			taints, pending, err := cl.gpuvetTaints(ctx)
			if err != nil {
				return r, err
			}
			b, wrong := checkBreaker(r.All, r.Injected, c.Nodes, c.MaxUnhealthyPct, c.Gate, taints, pending)
			r.Breaker, r.BreakerWrong = &b, wrong
			// The kill -9 run then picks and schedules its nodes as on a fresh fleet.
			if _, err := cl.resetVerdicts(ctx); err != nil {
				return r, err
			}
		}
	}
	if c.KillAfter > 0 && c.wants("kill") {
		fmt.Fprintf(c.Log, "kill -9 at %.0f %% of the nodes, then gpuvet clean …\n", 100*c.KillAfter)
		if r.KilledAt, r.Pods, r.CleanTook, r.Left, err = c.cleanAfterKill(ctx, cl, kc, c.KillAfter); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (r *report) fprint(w io.Writer, c config) {
	p := func(f string, a ...any) { fmt.Fprintf(w, f+"\n", a...) }
	p("k8sscale: %d kwok nodes × 8 GPUs, --parallel-nodes %d, kubernetes.qps %g burst %d", r.Nodes, c.ParallelNodes, c.QPS, c.Burst)
	if r.One != nil {
		p("  one node's own time        %6.1f s (a 1-node run, namespace to deletion)", r.One.Wall.Seconds())
	}
	if a := r.All; a != nil {
		beyond := "not measured (no 1-node run)"
		if r.One != nil {
			beyond = fmt.Sprintf("%.1f s", (a.Wall - r.One.Wall).Seconds())
		}
		p("  wall time, %4d nodes       %6.1f s; beyond one node's own time %s (target ≤ 300 s)", r.Nodes, a.Wall.Seconds(), beyond)
		p("  CPU seconds during it      %s (%.1f cores busy on average; the machine's load average at the end %s)", cpuLine(a.CPU), sum(a.CPU)/a.Wall.Seconds(), a.Load)
		p("  gpuvet peak RSS            %6.0f MiB (target ≤ 1024 MiB)", float64(a.MaxRSSKiB)/1024)
		n := float64(r.Nodes)
		self := int64(0)
		if a.Summary != nil && a.Summary.Fleet != nil {
			self = a.Summary.Fleet.APIRequests
		}
		p("  API requests per node      gpuvet %.1f (API server, its FlowSchema; %.1f by its own count in summary.json); every client %.1f (%s), of which the player %.1f",
			a.Requests.gpuvet/n, float64(self)/n, a.Requests.all/n, a.Requests.minus(counters{}).verbs(), float64(a.Player)/n)
		if r.One != nil {
			p("  API requests, one node     gpuvet %.0f; every client %.0f", r.One.Requests.gpuvet, r.One.Requests.all)
		}
		if a.Summary != nil {
			by, _ := verdicts(a.Summary)
			p("  hosts                      %d: %v; exit %d", len(a.Summary.Hosts), by, a.ExitCode)
			for _, l := range first(reasons(a.Summary), 12) {
				p("    %s", l)
			}
		}
		p("  injected                   straggler %s, never Ready %s, failed Job %s", r.Injected.Straggler, r.Injected.NeverReady, strings.Join(first(r.Injected.Failed, 4), ", "))
		switch {
		case a.Summary == nil:
			p("  named                      not known: summary.json could not be read")
		case len(r.Problems) == 0:
			p("  named                      the straggler, the %d failed and the never-ready node, and no other: ok", len(r.Injected.Failed))
		}
		for _, pr := range r.Problems {
			p("  NAMED WRONG                %s", pr)
		}
		if b := r.Breaker; b != nil {
			p("  circuit breaker            %d of %d nodes failed, limit %d (%g %%): %d tainted (Node objects), %d held (fleet.node_actions), %d held yet tainted; exit %d",
				b.Failed, r.Nodes, b.Limit, c.MaxUnhealthyPct, len(b.Tainted), len(b.Held), len(b.TaintedFromHeld), a.ExitCode)
			if i := strings.Index(a.Stderr, "circuit breaker: "); i >= 0 {
				line, _, _ := strings.Cut(a.Stderr[i:], "\n")
				p("    %s", line)
			}
			if c.Gate {
				p("  gate                       %d joined pending: %d released, %d quarantined, %d still pending (held, and the never-ready node)", r.Nodes, b.Released, len(b.Tainted), len(b.Pending))
			}
			if len(r.BreakerWrong) == 0 {
				p("  breaker                    stopped at its limit, the rest held and not tainted, the run failed naming it: ok")
			}
		}
		for _, w := range r.BreakerWrong {
			p("  BREAKER WRONG              %s", w)
		}
		p("  summary.json               %.2f MB (%s)", float64(a.Size)/1e6, filepath.Join(c.Dir, "all", "summary.json"))
	}
	if r.KilledAt > 0 || r.CleanTook > 0 {
		p("  kill -9 after %d nodes started (%d gpuvet pods up); gpuvet clean took %.1f s (target ≤ 120 s); left: %d", r.KilledAt, r.Pods, r.CleanTook.Seconds(), len(r.Left))
		for _, l := range first(r.Left, 10) {
			p("    LEFT %s", l)
		}
	}
	if r.Played != nil {
		p("  played pods                %v", r.Played)
	}
	for _, e := range first(r.PlayerErrors, 5) {
		p("  player: %s", strings.TrimSpace(e))
	}
}

func cpuLine(m map[string]float64) string {
	var s []string
	for _, k := range []string{"apiserver", "etcd", "kwok", "scheduler", "controller-manager", "gpuvet", "player"} {
		if v, ok := m[k]; ok {
			s = append(s, fmt.Sprintf("%s %.0f", k, v))
		}
	}
	return strings.Join(s, ", ")
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}
