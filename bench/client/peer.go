package main

// The side-by-side with the real peer (issue 16: gpuvet's client CPU per token ≤ 1/5 of vLLM's
// Python client's on the same server and load). One simulator serves both clients; each client is a
// child process, run one after the other and alternating (gpuvet, peer, gpuvet, peer, …), so both
// see the same server, the same machine load on average, and the same request mix. A client's CPU is
// its own rusage (user+sys); its tokens are what the simulator's trace says it streamed to it (every
// request in the client's time window, its warm-up and test requests included, since the client
// paid for those too). The peer script is not part of gpuvet: docs/client-vs-vllm.md says where to
// get it and how it was run.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpuvet/gpuvet/internal/metrics"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

var (
	peerScript = flag.String("peer", "", "side by side with vLLM's benchmarks/benchmark_serving.py at this path (see docs/client-vs-vllm.md); uses the first -streams value")
	peerPython = flag.String("peer-python", "python3", "the Python that runs -peer (needs aiohttp, numpy, tqdm, PIL, transformers, datasets, huggingface_hub or a shim of the last three)")
	peerPath   = flag.String("peer-pythonpath", "", "folder put first on the peer's PYTHONPATH (e.g. an offline tokenizer shim)")
	peerAlt    = flag.Int("alternations", 3, "side by side: gpuvet/peer pairs to run")
	peerPrompt = flag.Int("prompt-tokens", 64, "side by side: prompt tokens per request")
)

// clientRun is one client process's run against the shared simulator.
type clientRun struct {
	client     string // "gpuvet" or "peer"
	cpu        time.Duration
	start, end time.Time
	tokS       float64 // as the client reports it
	ttft, itl  float64 // client's p50, ms (NaN where it gives none)
	tokens     int     // streamed to it, from the trace
	truthTTFT  float64 // trace p50 over its window, ms
	truthITL   float64
}

func (r clientRun) usPerTok() float64 { return float64(r.cpu.Microseconds()) / float64(r.tokens) }

// sideBySide starts one simulator and runs both clients on it, a fixed-cost pair first (one request
// each: process start, imports, connection set-up), then -alternations measured pairs.
func sideBySide(bin string, streams, per, tokens int, ttft, itl time.Duration) error {
	if err := checkPeer(*peerScript, *peerPython); err != nil {
		return err
	}
	if *peerAlt < 1 {
		return fmt.Errorf("-alternations %d: want at least 1", *peerAlt)
	}
	dir, err := os.MkdirTemp("", "gpuvet-peer-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		return err
	}
	tracePath := filepath.Join(dir, "trace.jsonl")
	srv := exec.Command(bin, "sim", "--model", "mock", "--ttft", ttft.String(), "--itl", itl.String(),
		"--port", strconv.Itoa(port), "--trace", tracePath)
	var srvErr bytes.Buffer
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		return err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			srv.Process.Signal(syscall.SIGTERM)
			srv.Wait()
		}
	}
	defer stop()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitUp(url); err != nil {
		return err
	}
	n := streams * per
	fmt.Printf("side by side on one gpuvet sim (fixed TTFT %v, ITL %v): %d streams, %d requests × %d output tokens, %d-token prompts, completions API\n",
		ttft, itl, streams, n, tokens, *peerPrompt)
	fmt.Printf("peer: %s %s%s\n", *peerPython, *peerScript, map[bool]string{true: "", false: " (PYTHONPATH first: " + *peerPath + ")"}[*peerPath == ""])

	var runs []clientRun
	one := func(client string, i, streams, n int) error {
		var r clientRun
		var err error
		out := filepath.Join(dir, fmt.Sprintf("%s-%d.json", client, i))
		if client == "gpuvet" {
			r, err = runGpuvet(bin, url, out, streams, n, tokens)
		} else {
			r, err = runPeer(url, out, streams, n, tokens)
		}
		if err != nil {
			return fmt.Errorf("%s run %d: %w", client, i, err)
		}
		runs = append(runs, r)
		return nil
	}
	fmt.Printf("load average before: %s\n", loadavg())
	// Fixed cost: one request each, one stream, as many times as the measured pairs (one sample is
	// too noisy on a shared machine; the median is used).
	for i := 1; i <= *peerAlt; i++ {
		if err := one("gpuvet", -i, 1, 1); err != nil {
			return err
		}
		if err := one("peer", -i, 1, 1); err != nil {
			return err
		}
	}
	for i := 1; i <= *peerAlt; i++ {
		if err := one("gpuvet", i, streams, n); err != nil {
			return err
		}
		if err := one("peer", i, streams, n); err != nil {
			return err
		}
	}
	fmt.Printf("load average after:  %s\n", loadavg())
	stop()
	if err := attribute(tracePath, runs); err != nil {
		return fmt.Errorf("%w (simulator stderr: %s)", err, tail(srvErr.Bytes()))
	}
	report(runs[:2**peerAlt], runs[2**peerAlt:], itl)
	return nil
}

// loadavg is the machine's 1/5/15-minute load (Linux), to say how shared the CPU was.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// checkPeer fails early and clearly when the peer cannot run at all.
func checkPeer(script, python string) error {
	st, err := os.Stat(script)
	if err != nil {
		return fmt.Errorf("-peer %s: %w (get benchmarks/benchmark_serving.py and backend_request_func.py of one vLLM commit: docs/client-vs-vllm.md)", script, err)
	}
	if st.IsDir() {
		return fmt.Errorf("-peer %s is a folder: give the path of benchmark_serving.py", script)
	}
	if _, err := exec.LookPath(python); err != nil {
		return fmt.Errorf("-peer-python %s: %w", python, err)
	}
	return nil
}

// runChild runs a client process and returns its own CPU (user+sys) and wall window.
func runChild(cmd *exec.Cmd) (cpu time.Duration, start, end time.Time, err error) {
	var stderr, stdout bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stdout
	start = time.Now()
	err = cmd.Run()
	end = time.Now()
	if err != nil {
		return 0, start, end, fmt.Errorf("%s: %w\n--- stderr (tail) ---\n%s\n--- stdout (tail) ---\n%s",
			strings.Join(cmd.Args, " "), err, tail(stderr.Bytes()), tail(stdout.Bytes()))
	}
	ps := cmd.ProcessState
	return ps.UserTime() + ps.SystemTime(), start, end, nil
}

func runGpuvet(bin, url, out string, streams, n, tokens int) (clientRun, error) {
	cmd := exec.Command(bin, "bench", "--url", url, "--model", "mock", "--api", "completions",
		"--profile", "concurrency", "--concurrency", strconv.Itoa(streams), "--max-requests", strconv.Itoa(n),
		"--output-tokens", strconv.Itoa(tokens), "--prompt-tokens", strconv.Itoa(*peerPrompt), "--out", out)
	cpu, start, end, err := runChild(cmd)
	if err != nil {
		return clientRun{}, err
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return clientRun{}, err
	}
	var l results.Load
	if err := json.Unmarshal(b, &l); err != nil {
		return clientRun{}, fmt.Errorf("%s: %w", out, err)
	}
	if len(l.Runs) == 0 {
		return clientRun{}, fmt.Errorf("%s: no run in the result (error: %q)", out, l.Error)
	}
	r := l.Runs[0]
	return clientRun{client: "gpuvet", cpu: cpu, start: start, end: end, tokS: r.OutputTokS, ttft: r.TTFT.P50, itl: r.ITL.P50}, nil
}

// peerResult is the part of benchmark_serving.py's --save-result JSON read here (the same keys
// from 2024 to 2025 releases): per-request TTFTs and ITLs in seconds.
type peerResult struct {
	Completed        int         `json:"completed"`
	OutputThroughput float64     `json:"output_throughput"`
	TTFTs            []float64   `json:"ttfts"`
	ITLs             [][]float64 `json:"itls"`
	Errors           []string    `json:"errors"`
}

func runPeer(url, out string, streams, n, tokens int) (clientRun, error) {
	cmd := exec.Command(*peerPython, *peerScript, "--backend", "vllm", "--base-url", url,
		"--endpoint", "/v1/completions", "--model", "mock", "--dataset-name", "random",
		"--random-input-len", strconv.Itoa(*peerPrompt), "--random-output-len", strconv.Itoa(tokens),
		"--num-prompts", strconv.Itoa(n), "--request-rate", "inf", "--max-concurrency", strconv.Itoa(streams),
		"--ignore-eos", "--disable-tqdm", "--save-result", "--result-filename", out)
	cmd.Env = os.Environ()
	if *peerPath != "" {
		p := *peerPath
		if old := os.Getenv("PYTHONPATH"); old != "" {
			p += string(os.PathListSeparator) + old
		}
		cmd.Env = append(cmd.Env, "PYTHONPATH="+p)
	}
	cpu, start, end, err := runChild(cmd)
	if err != nil {
		return clientRun{}, err
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return clientRun{}, fmt.Errorf("the peer wrote no result: %w", err)
	}
	pr, err := parsePeer(b)
	if err != nil {
		return clientRun{}, fmt.Errorf("%s: %w", out, err)
	}
	if pr.Completed != n {
		return clientRun{}, fmt.Errorf("the peer completed %d of %d requests (first error: %s)", pr.Completed, n, firstError(pr.Errors))
	}
	ttftP50, itlP50 := pr.p50s()
	return clientRun{client: "peer", cpu: cpu, start: start, end: end, tokS: pr.OutputThroughput,
		ttft: ttftP50, itl: itlP50}, nil
}

// p50s is the peer's TTFT and ITL p50 in ms over its successful requests, as the peer measured
// them (its own median_ttft_ms / median_itl_ms, which not every version writes).
func (pr peerResult) p50s() (ttft, itl float64) {
	var tt, it []float64
	for i, v := range pr.TTFTs {
		if i < len(pr.Errors) && pr.Errors[i] != "" {
			continue
		}
		tt = append(tt, v*1000)
		if i < len(pr.ITLs) {
			for _, x := range pr.ITLs[i] {
				it = append(it, x*1000)
			}
		}
	}
	return metrics.Summarize(tt).P50, metrics.Summarize(it).P50
}

func parsePeer(b []byte) (peerResult, error) {
	var pr peerResult
	if err := json.Unmarshal(b, &pr); err != nil {
		return pr, err
	}
	if pr.TTFTs == nil {
		return pr, errors.New(`no "ttfts" array: not a benchmark_serving.py --save-result file`)
	}
	return pr, nil
}

func firstError(errs []string) string {
	for _, e := range errs {
		if e != "" {
			return tail([]byte(e))
		}
	}
	return "none given"
}

// attribute reads the trace once the simulator has stopped (it buffers) and gives each run the
// requests that arrived in its window: the tokens streamed to it and the server's own TTFT/ITL p50.
func attribute(path string, runs []clientRun) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tt := make([][]float64, len(runs))
	it := make([][]float64, len(runs))
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var r sim.TraceRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		i := slices.IndexFunc(runs, func(c clientRun) bool { return !r.Arrival.Before(c.start) && !r.Arrival.After(c.end) })
		if i < 0 || r.Status != 200 || r.Fault != "" {
			continue
		}
		runs[i].tokens += len(r.TokenMs)
		if len(r.TokenMs) < 3 {
			continue // calibration and probe requests: not part of the latency truth
		}
		tt[i] = append(tt[i], r.TTFTMs())
		for k := 1; k < len(r.TokenMs); k++ {
			it[i] = append(it[i], r.TokenMs[k]-r.TokenMs[k-1])
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for i := range runs {
		if runs[i].tokens == 0 {
			return fmt.Errorf("%s run: the trace shows no token streamed in its window", runs[i].client)
		}
		runs[i].truthTTFT = metrics.Summarize(tt[i]).P50
		runs[i].truthITL = metrics.Summarize(it[i]).P50
	}
	return nil
}

// report prints each run, then per-client ranges and the peer/gpuvet ratios, both as measured and
// with each client's fixed cost (the median of its one-request runs) taken out. A pair in which the
// simulator itself fell behind (its own ITL p50 under half the set ITL: it sent tokens in bursts) is
// shown but left out of the summary: a bursty server lets a client read many tokens per wake-up, so
// CPU per token there says little about the client.
func report(fixedRuns, runs []clientRun, itl time.Duration) {
	fmt.Printf("\n%-4s %-7s %8s %9s %11s %13s %9s %9s %8s %9s %8s\n", "run", "client", "CPU s", "tokens", "µs CPU/tok", "µs excl.fixed", "tok/s",
		"TTFT p50", "trace", "ITL p50", "trace")
	behind := func(r clientRun) bool { return r.truthITL < float64(itl.Microseconds())/1000/2 }
	row := func(run string, r clientRun, excl string) {
		note := ""
		if behind(r) {
			note = "  server behind schedule"
		}
		fmt.Printf("%-4s %-7s %8.2f %9d %11.2f %13s %9.0f %9.2f %8.2f %9.3f %8.3f%s\n", run, r.client, r.cpu.Seconds(), r.tokens,
			r.usPerTok(), excl, r.tokS, r.ttft, r.truthTTFT, r.itl, r.truthITL, note)
	}
	for _, r := range fixedRuns {
		row("fix", r, "-")
	}
	fixed := map[string]clientRun{"gpuvet": medianCPU(fixedRuns, "gpuvet"), "peer": medianCPU(fixedRuns, "peer")}
	var g, p, ge, pe, ratio, ratioE, all []float64
	for i := 0; i+1 < len(runs); i += 2 {
		gr, pr := runs[i], runs[i+1]
		gx, px := exclFixed(gr, fixed["gpuvet"]), exclFixed(pr, fixed["peer"])
		row(strconv.Itoa(i/2+1), gr, fmt.Sprintf("%.2f", gx))
		row(strconv.Itoa(i/2+1), pr, fmt.Sprintf("%.2f", px))
		all = append(all, pr.usPerTok()/gr.usPerTok())
		if behind(gr) || behind(pr) {
			continue
		}
		g, p = append(g, gr.usPerTok()), append(p, pr.usPerTok())
		ge, pe = append(ge, gx), append(pe, px)
		ratio = append(ratio, pr.usPerTok()/gr.usPerTok())
		ratioE = append(ratioE, px/gx)
	}
	var gf, pf []float64
	for _, r := range fixedRuns {
		if r.client == "gpuvet" {
			gf = append(gf, r.cpu.Seconds())
		} else {
			pf = append(pf, r.cpu.Seconds())
		}
	}
	fmt.Printf("\nfixed cost (1 request, s of CPU): gpuvet %s, peer %s\n", span(gf), span(pf))
	fmt.Printf("%d of %d pairs with the simulator on schedule; over those:\n", len(ratio), len(all))
	fmt.Printf("µs of client CPU per token: gpuvet %s, peer %s; peer ÷ gpuvet per pair %s\n", span(g), span(p), span(ratio))
	fmt.Printf("fixed cost taken out:       gpuvet %s, peer %s; peer ÷ gpuvet per pair %s\n", span(ge), span(pe), span(ratioE))
	if len(ratio) < len(all) {
		fmt.Printf("(peer ÷ gpuvet over all %d pairs: %s)\n", len(all), span(all))
	}
	verdict := "MET"
	switch {
	case len(ratio) == 0:
		verdict = "undecided: the simulator fell behind in every pair; rerun on a quieter machine"
	case slices.Min(ratio) < 5:
		verdict = "NOT met"
	}
	fmt.Printf("issue 16 target (gpuvet ≤ 1/5 of the peer in every pair, as measured): %s\n", verdict)
}

// medianCPU is the client's one-request run of median CPU.
func medianCPU(runs []clientRun, client string) clientRun {
	var c []clientRun
	for _, r := range runs {
		if r.client == client {
			c = append(c, r)
		}
	}
	slices.SortFunc(c, func(a, b clientRun) int { return int(a.cpu - b.cpu) })
	return c[len(c)/2]
}

// exclFixed is a run's CPU per token with the client's one-request cost (start-up, imports) taken
// out of both its CPU and its tokens.
func exclFixed(r, fixed clientRun) float64 {
	return float64((r.cpu - fixed.cpu).Microseconds()) / float64(r.tokens-fixed.tokens)
}

// span formats values as "min–max (median)".
func span(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 1 {
		return fmt.Sprintf("%.2f", s[0])
	}
	return fmt.Sprintf("%.2f–%.2f (median %.2f)", s[0], s[len(s)-1], s[len(s)/2])
}

// tail is the end of a child's output, enough to show why it failed.
func tail(b []byte) string {
	const max = 2000
	b = bytes.TrimSpace(b)
	if len(b) > max {
		b = append([]byte("…"), b[len(b)-max:]...)
	}
	return string(b)
}
