package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuvet/gpuvet/internal/k8s/kwokplayer"
	"github.com/gpuvet/gpuvet/internal/results"
)

// config is one harness run's settings.
type config struct {
	Kubeconfig    string // the admin kubeconfig of the harness's control plane
	Nodes         int
	ParallelNodes int
	QPS           float64
	Burst         int
	Gpuvet        string // gpuvet binary ("": built from this checkout)
	Dir           string // work folder (outputs, logs, state)
	ReadyTimeout  time.Duration
	Pace          kwokplayer.Pace
	KillAfter     float64 // the kill -9 run is killed once this share of the nodes has started (0: no kill run)
	// FailShare of the nodes fail in the N-node run (their health Job finds a GPU computing wrong
	// answers; the never-ready node counts, failed on its engine), to trip gpuvet's circuit breaker
	// (0: one failed node, as the bench had first).
	FailShare float64
	// MaxUnhealthyPct: the N-node run passes --taint-failed --max-unhealthy this %, and the
	// harness checks the breaker on the Node objects (0: no verdicts written).
	MaxUnhealthyPct float64
	// Gate: with MaxUnhealthyPct, the N-node run's nodes join pending (gpuvet.io/validation-pending)
	// and it passes --gate, the acceptance gate (docs/acceptance.md): a node found ok is released,
	// a failed or flagged one quarantined under the breaker, an undecided or held one kept pending.
	Gate    bool
	Verbose bool
	Log     io.Writer
	Runs    map[string]bool // which of one, all, kill to run (nil: all three)
}

// wants says whether the harness makes run r (one, all or kill).
func (c config) wants(r string) bool { return c.Runs == nil || c.Runs[r] }

// profile is the load profile of the recorded load (kwokplayer/testdata/README.md): the plan the
// load Jobs get says what the played results measured.
var profile = []string{"--set", "load.max_duration=3s", "--set", "load.rates=2", "--set", "load.max_concurrency=16",
	"--set", "load.prompt_tokens=64", "--set", "load.output_tokens=32", "--set", "load.warmup=1"}

// injected are the nodes the player makes misbehave, and what the run must say of them.
type injected struct {
	Straggler, NeverReady string
	Failed                []string // their health Job fails
}

// injectedFor picks them on n nodes: the straggler n/4, the never-ready node 3n/4, and either one
// failed node (n/2) or, with share > 0, so many that share of the nodes fail with the never-ready
// one (two in five, spread over the fleet: every wave of gpuvet's has some). kwok-gpu-0, the
// one-node run's, stays healthy.
func injectedFor(n int, share float64) injected {
	if n < 4 {
		return injected{}
	}
	in := injected{Straggler: nodeName(n / 4), NeverReady: nodeName(3 * n / 4)}
	if share <= 0 {
		in.Failed = []string{nodeName(n / 2)}
		return in
	}
	want := max(1, int(math.Round(share*float64(n)))-1)
	taken := map[int]bool{0: true, n / 4: true, 3 * n / 4: true}
	for _, spread := range []bool{true, false} { // the spread first; the rest only if n is small
		for i := 1; i < n && len(in.Failed) < want; i++ {
			if !taken[i] && (!spread || i%5 == 1 || i%5 == 3) {
				taken[i] = true
				in.Failed = append(in.Failed, nodeName(i))
			}
		}
	}
	return in
}

// failed are the nodes the run must find failed.
func (in injected) failed() []string {
	if in.NeverReady == "" {
		return in.Failed
	}
	return append(append([]string{}, in.Failed...), in.NeverReady)
}

// outcome is what one gpuvet run gave.
type outcome struct {
	Wall      time.Duration
	MaxRSSKiB int64
	ExitCode  int
	Summary   *results.Summary
	Size      int64 // summary.json's bytes
	Requests  counters
	Player    int64 // the player's requests meanwhile
	Stderr    string
	CPU       map[string]float64 // CPU seconds each process spent during the run
	Load      string             // the machine's load average at the end (/proc/loadavg)
}

// args are the run's; verdicts: the N-node run's --taint-failed under the circuit breaker.
func (c config) args(out, kubeconfig string, nodes int, verdicts bool) []string {
	a := []string{"run", "--backend", "kubernetes", "--kubeconfig", kubeconfig, "--image", "gpuvet:scale",
		"--engine", "generic", "--engine-cmd", "gpuvet sim --gpu H200 --model {model} --host 0.0.0.0 --port {port}",
		"--model", "Qwen/Qwen3-8B", "--cache-size", "1Gi", "--health-args", "--sim --sim-count 8 --dcgm=false",
		"--parallel-gpus", "8", "--parallel-nodes", fmt.Sprint(c.ParallelNodes), "--nodes", fmt.Sprint(nodes), "--out", out,
		"--set", "engine.ready_timeout=" + c.ReadyTimeout.String()}
	if c.QPS > 0 { // 0: leave the keys out (a gpuvet from before they existed)
		a = append(a, "--set", fmt.Sprintf("kubernetes.qps=%g", c.QPS), "--set", fmt.Sprintf("kubernetes.burst=%d", c.Burst))
	}
	if verdicts && c.MaxUnhealthyPct > 0 {
		a = append(a, "--taint-failed", "--max-unhealthy", fmt.Sprintf("%g%%", c.MaxUnhealthyPct))
		if c.Gate {
			a = append(a, "--gate")
		}
	}
	return append(a, profile...)
}

// runGpuvet runs `gpuvet run --backend kubernetes` on nodes nodes and measures it; kill, if not
// nil, is called with the process once started and may kill it.
func (c config) runGpuvet(ctx context.Context, cl *cluster, kubeconfig, name string, nodes int, kill func(*os.Process, *lineCounter)) (*outcome, error) {
	out := filepath.Join(c.Dir, name)
	state := filepath.Join(c.Dir, "state")
	// The harness's own folder: an earlier harness run's results there would make gpuvet refuse
	// (exit 2) and leave the old summary to be read as this run's.
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	before, err := cl.scrape(ctx)
	if err != nil {
		return nil, err
	}
	p0 := cl.player.Load()
	cpu0 := cl.cpu()
	cmd := exec.CommandContext(ctx, c.Gpuvet, c.args(out, kubeconfig, nodes, name == "all")...)
	cmd.Env = append(os.Environ(), "GPUVET_STATE_DIR="+state)
	var stderr bytes.Buffer
	lc := &lineCounter{}
	errw := io.MultiWriter(&stderr, lc)
	if c.Verbose {
		errw = io.MultiWriter(errw, c.Log)
	}
	cmd.Stderr = errw
	cmd.Stdout = io.Discard
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if kill != nil {
		go kill(cmd.Process, lc)
	}
	err = cmd.Wait()
	o := &outcome{Wall: time.Since(start), Stderr: stderr.String()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		o.MaxRSSKiB = ru.Maxrss
	}
	o.ExitCode = cmd.ProcessState.ExitCode()
	if err != nil && (o.ExitCode < 0 || o.ExitCode == 2) && kill == nil { // 2: refused before it ran
		return o, fmt.Errorf("gpuvet: %w:\n%s", err, tail(o.Stderr, 10))
	}
	after, err := cl.scrape(ctx)
	if err != nil {
		return o, err
	}
	o.Requests, o.Player = after.minus(before), cl.player.Load()-p0
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		o.Load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	o.CPU = map[string]float64{"gpuvet": (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()}
	for k, v := range cl.cpu() {
		o.CPU[k] = v - cpu0[k]
	}
	sp := filepath.Join(out, "summary.json")
	o.Size = fileSize(sp)
	if s, err := results.Read(sp); err == nil {
		o.Summary = s
	} else if kill == nil {
		return o, fmt.Errorf("%s: %w; gpuvet exit %d:\n%s", sp, err, o.ExitCode, tail(o.Stderr, 30))
	}
	return o, nil
}

// lineCounter counts gpuvet's progress lines that say a node started its health Job.
type lineCounter struct {
	mu      sync.Mutex
	partial []byte
	started int
}

func (l *lineCounter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		if bytes.Contains(l.partial[:i], []byte(": health: ")) {
			l.started++
		}
		l.partial = l.partial[i+1:]
	}
	return len(b), nil
}

func (l *lineCounter) Started() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

// verdicts are the run's hosts by status, and the ones that are not ok.
func verdicts(s *results.Summary) (byStatus map[results.Status]int, notOK map[string]string) {
	byStatus, notOK = map[results.Status]int{}, map[string]string{}
	for _, h := range s.Hosts {
		byStatus[h.Status]++
		if h.Status != results.StatusOK {
			notOK[h.Name] = string(h.Status)
		}
	}
	for _, sk := range s.Fleet.Skipped {
		notOK[sk.Name] = "skipped: " + sk.Reason
	}
	return byStatus, notOK
}

// check says what is wrong with a run's verdicts: the injected nodes must be named (the straggler
// flagged, the failed and the never-ready node failed) and no other node may be anything but ok.
func check(s *results.Summary, inj injected, nodes int) []string {
	var bad []string
	if len(s.Hosts) != nodes {
		bad = append(bad, fmt.Sprintf("%d hosts in the summary, want %d", len(s.Hosts), nodes))
	}
	_, notOK := verdicts(s)
	want := map[string]results.Status{inj.Straggler: results.StatusFlag}
	for _, n := range inj.failed() {
		want[n] = results.StatusFailed
	}
	for name, st := range want {
		if name == "" {
			continue
		}
		if got := notOK[name]; got != string(st) {
			bad = append(bad, fmt.Sprintf("%s is %q, want %s", name, orOK(got), st))
		}
	}
	var others []string
	for name, st := range notOK {
		if _, ok := want[name]; !ok {
			others = append(others, name+" "+st)
		}
	}
	sort.Strings(others)
	if len(others) > 0 {
		bad = append(bad, fmt.Sprintf("%d other node(s) not ok: %s", len(others), strings.Join(first(others, 8), ", ")))
	}
	return bad
}

// breakerOutcome is what the circuit breaker (and the gate) did in the N-node run, read back.
type breakerOutcome struct {
	Limit, Failed   int
	Tainted, Held   []string // Tainted: the Node objects with gpuvet's quarantine taint of the run
	TaintedFromHeld []string // held in summary.json yet tainted
	Pending         []string // the gate: nodes still pending after the run
	Released        int      // the gate: nodes neither pending nor quarantined after it
}

// checkBreaker says what is wrong with what the circuit breaker did, read back from the cluster:
// exactly the limit of the quarantined nodes carry the run's quarantine taint (read from the Node
// objects), every other one is recorded as held in fleet.node_actions and is not tainted, no other
// node is tainted, and the run exits 1 naming the breaker. With the gate, the straggler (flag)
// is quarantined too, and every node that joined pending must have left it (released or
// quarantined) but the held ones and the never-ready node (undecided: pending).
//
// The breaker weighs the nodes that failed on the hardware's evidence (their health Job found a GPU
// computing wrong answers); the never-ready node failed on its engine, which a quarantine never
// acts on (issue 50): it is neither tainted nor held.
func checkBreaker(o *outcome, inj injected, nodes int, pct float64, gate bool, taints map[string]string, pending map[string]bool) (breakerOutcome, []string) {
	quarantine := append([]string{}, inj.Failed...)
	if gate && inj.Straggler != "" {
		quarantine = append(quarantine, inj.Straggler)
	}
	b := breakerOutcome{Limit: int(math.Ceil(pct*float64(nodes)/100 - 1e-9)), Failed: len(quarantine)}
	isQuarantined := map[string]bool{}
	for _, n := range quarantine {
		isQuarantined[n] = true
	}
	var bad []string
	runID := ""
	if o.Summary != nil {
		runID = o.Summary.RunID
	}
	for n, v := range taints {
		b.Tainted = append(b.Tainted, n)
		if !isQuarantined[n] {
			bad = append(bad, fmt.Sprintf("%s is tainted but did not fail", n))
		}
		if v != runID {
			bad = append(bad, fmt.Sprintf("%s's taint names run %q, not this run's %q", n, v, runID))
		}
	}
	sort.Strings(b.Tainted)
	if len(b.Tainted) != b.Limit {
		bad = append(bad, fmt.Sprintf("%d node(s) tainted, want the breaker's limit %d (%g %% of %d)", len(b.Tainted), b.Limit, pct, nodes))
	}
	held := map[string]bool{}
	if o.Summary != nil && o.Summary.Fleet != nil {
		for _, a := range o.Summary.Fleet.NodeActions {
			if a.Held == "" {
				continue
			}
			held[a.Node] = true
			b.Held = append(b.Held, a.Node)
			if _, ok := taints[a.Node]; ok {
				b.TaintedFromHeld = append(b.TaintedFromHeld, a.Node)
			}
		}
	}
	sort.Strings(b.Held)
	var missing []string
	for _, n := range quarantine {
		if _, t := taints[n]; !t && !held[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		bad = append(bad, fmt.Sprintf("%d failed node(s) neither tainted nor held in fleet.node_actions: %s", len(missing), strings.Join(first(missing, 8), ", ")))
	}
	if len(b.TaintedFromHeld) > 0 {
		bad = append(bad, fmt.Sprintf("%d node(s) held in fleet.node_actions yet tainted: %s", len(b.TaintedFromHeld), strings.Join(first(b.TaintedFromHeld, 8), ", ")))
	}
	if want := len(quarantine) - b.Limit; len(b.Held) != want {
		bad = append(bad, fmt.Sprintf("%d node(s) held, want %d (%d failed, %d allowed)", len(b.Held), want, len(quarantine), b.Limit))
	}
	if gate {
		bad = append(bad, b.checkPending(inj, nodes, taints, held, pending)...)
	}
	msg := fmt.Sprintf("circuit breaker: %d of %d nodes failed (limit %g %%)", len(quarantine), nodes, pct)
	if o.ExitCode != 1 || !strings.Contains(o.Stderr, msg) {
		bad = append(bad, fmt.Sprintf("exit %d, want 1 with %q on stderr; its end:\n%s", o.ExitCode, msg, tail(o.Stderr, 5)))
	}
	return b, bad
}

// checkPending says which of the nodes that joined pending are wrongly pending or not: a node the
// breaker held and the never-ready node (undecided) stay pending; every other was released or
// quarantined.
func (b *breakerOutcome) checkPending(inj injected, nodes int, taints map[string]string, held, pending map[string]bool) []string {
	var stuck, gone []string
	for i := range nodes {
		n := nodeName(i)
		want := held[n] || n == inj.NeverReady
		switch {
		case pending[n]:
			b.Pending = append(b.Pending, n)
			if !want {
				stuck = append(stuck, n)
			}
		case want:
			gone = append(gone, n)
		default:
			if _, t := taints[n]; !t {
				b.Released++
			}
		}
	}
	var bad []string
	if len(stuck) > 0 {
		bad = append(bad, fmt.Sprintf("%d node(s) still pending that the gate should have released or quarantined: %s", len(stuck), strings.Join(first(stuck, 8), ", ")))
	}
	if len(gone) > 0 {
		bad = append(bad, fmt.Sprintf("%d node(s) no longer pending that should be (held by the breaker, or undecided): %s", len(gone), strings.Join(first(gone, 8), ", ")))
	}
	return bad
}

func orOK(s string) string {
	if s == "" {
		return "ok"
	}
	return s
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("… %d more", len(s)-n))
	}
	return s
}

// reasons names each not-ok host with the first line of why.
func reasons(s *results.Summary) []string {
	first := map[string]string{} // each host's first finding, as the terminal says it
	for _, f := range s.Findings {
		if _, ok := first[f.Host]; !ok && f.Host != "" {
			first[f.Host] = f.Line()
		}
	}
	var out []string
	for _, h := range s.Hosts {
		if h.Status == results.StatusOK {
			continue
		}
		why := first[h.Name]
		if why == "" {
			why = h.Error
		}
		why, _, _ = strings.Cut(why, "\n")
		if len(why) > 160 {
			why = why[:160] + "…"
		}
		out = append(out, fmt.Sprintf("%s %s: %s", h.Name, h.Status, why))
	}
	sort.Strings(out)
	return out
}

// cleanAfterKill starts a run on every node, kills it with SIGKILL once share of the nodes have
// started, then times `gpuvet clean` and lists what is left.
func (c config) cleanAfterKill(ctx context.Context, cl *cluster, kubeconfig string, share float64) (killedAt int, pods int, took time.Duration, left []string, err error) {
	state := filepath.Join(c.Dir, "state")
	want := max(1, int(share*float64(c.Nodes)))
	_, err = c.runGpuvet(ctx, cl, kubeconfig, "killed", c.Nodes, func(p *os.Process, lc *lineCounter) {
		for lc.Started() < want && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second) // the wave in flight creates its engine pods
		killedAt = lc.Started()
		pods = cl.podCount(ctx)
		_ = p.Kill()
	})
	if err != nil {
		return 0, 0, 0, nil, err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, c.Gpuvet, "clean", "--kubeconfig", kubeconfig)
	cmd.Env = append(os.Environ(), "GPUVET_STATE_DIR="+state)
	b, cerr := cmd.CombinedOutput()
	took = time.Since(start)
	if cerr != nil {
		return killedAt, pods, took, nil, fmt.Errorf("gpuvet clean: %w\n%s", cerr, tail(string(b), 20))
	}
	left, err = cl.leftovers(ctx, state)
	return killedAt, pods, took, left, err
}

func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
