// Command client measures gpuvet's load generator against the simulator's ground truth: for each
// stream count it starts `gpuvet sim` (fixed TTFT/ITL, --trace) as a separate process, drives it with
// load.Run in this process (profile concurrency, exact output lengths), and prints the client's CPU per
// streamed token, the tokens/s it sustained, its self-check, and its TTFT/ITL p50 against the trace.
// With -hog a second process spins on one core beside the client for the whole run.
//
//	go build -o /tmp/gpuvet ./cmd/gpuvet
//	go run ./bench/client -gpuvet /tmp/gpuvet -streams 128,1000,4000 [-hog] [-one-core]
//
// With -peer PATH it runs gpuvet's client and vLLM's Python benchmark_serving.py side by side instead
// (peer.go, docs/client-vs-vllm.md):
//
//	go run ./bench/client -gpuvet /tmp/gpuvet -streams 128 -peer /path/to/vllm/benchmarks/benchmark_serving.py
//
// Targets (issue 16): ≤ 1/5 of vLLM's benchmark_serving.py CPU per token on the same load; 1,000
// streams at 50,000 tok/s with no client lag on one core; with a hog, TTFT p50 within 1 ms and ITL p50
// within 0.3 ms of the trace.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/metrics"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

func main() {
	if os.Getenv("GPUVET_BENCH_HOG") == "1" {
		hog()
	}
	bin := flag.String("gpuvet", "", "path to a built gpuvet binary (go build -o /tmp/gpuvet ./cmd/gpuvet)")
	streams := flag.String("streams", "128,1000,4000", "stream counts, comma-separated")
	perStream := flag.Int("requests", 10, "requests per stream")
	tokens := flag.Int("tokens", 128, "output tokens per request")
	ttft := flag.Duration("ttft", 10*time.Millisecond, "the simulator's TTFT")
	itl := flag.Duration("itl", 4*time.Millisecond, "the simulator's ITL")
	withHog := flag.Bool("hog", false, "run a second process that spins on one core beside the client")
	oneCore := flag.Bool("one-core", false, "run the client with GOMAXPROCS=1")
	flag.StringVar(&simCPUs, "sim-cpus", "", "pin the simulator to these CPUs with taskset (e.g. 0; pin the client with taskset -c 1 go run …)")
	flag.StringVar(&reader, "reader", load.ReaderAuto, "reader of streamed responses: "+strings.Join(load.Readers, ", "))
	cpuProfile := flag.String("cpuprofile", "", "write the client's CPU profile here")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "-cpuprofile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "-gpuvet is required: go build -o /tmp/gpuvet ./cmd/gpuvet")
		os.Exit(2)
	}
	if *oneCore {
		runtime.GOMAXPROCS(1)
	}
	if *withHog {
		h := exec.Command(os.Args[0])
		h.Env = append(os.Environ(), "GPUVET_BENCH_HOG=1")
		if err := h.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "hog:", err)
			os.Exit(1)
		}
		defer func() { h.Process.Kill(); h.Wait() }()
	}
	if *peerScript != "" {
		n, err := strconv.Atoi(strings.TrimSpace(strings.Split(*streams, ",")[0]))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "-streams %q: want a positive integer\n", *streams)
			os.Exit(2)
		}
		if err := sideBySide(*bin, n, *perStream, *tokens, *ttft, *itl); err != nil {
			fmt.Fprintln(os.Stderr, "side by side:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Printf("%-8s %10s %12s %10s %10s %10s %10s %10s %10s  %s\n", "streams", "µs CPU/tok", "tok/s", "TTFT p50", "trace", "ITL p50", "trace", "rx wait", "lag p99", "client check")
	for _, f := range strings.Split(*streams, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "-streams %q: want positive integers\n", f)
			os.Exit(2)
		}
		if err := one(*bin, n, *perStream, *tokens, *ttft, *itl); err != nil {
			fmt.Fprintf(os.Stderr, "%d streams: %v\n", n, err)
			os.Exit(1)
		}
	}
}

// reader is the client's reader of streamed responses (-reader); simCPUs pins the simulator (-sim-cpus).
var reader, simCPUs string

// one runs n streams × per requests against a fresh simulator and prints a line.
func one(bin string, n, per, tokens int, ttft, itl time.Duration) error {
	trace, err := os.CreateTemp("", "gpuvet-bench-trace-*.jsonl")
	if err != nil {
		return err
	}
	trace.Close()
	defer os.Remove(trace.Name())
	port, err := freePort()
	if err != nil {
		return err
	}
	srv := exec.Command(bin, "sim", "--model", "mock", "--ttft", ttft.String(), "--itl", itl.String(),
		"--port", strconv.Itoa(port), "--trace", trace.Name())
	if simCPUs != "" {
		srv = exec.Command("taskset", append([]string{"-c", simCPUs}, srv.Args...)...)
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitUp(url); err != nil {
		return err
	}
	cpu0 := cpu()
	l, err := load.Run(context.Background(), load.Options{URL: url, Model: "mock", Config: results.LoadConfig{
		Profile: "concurrency", Concurrency: n, MaxRequests: n * per, OutputTokens: tokens, PromptTokens: 64, API: "completions", Reader: reader}})
	used := cpu() - cpu0
	if err != nil {
		return err
	}
	srv.Process.Signal(syscall.SIGTERM)
	srv.Wait()
	r := l.Runs[0]
	got := float64(r.Requests.Successful+r.Requests.Warmup) * r.MeanOutputTokens
	tt, it, err := truth(trace.Name())
	if err != nil {
		return err
	}
	wait := 0.0
	if l.Client.RXWait != nil {
		wait = l.Client.RXWait.P50
	}
	check := "ok"
	if l.Client.ClientLimited {
		check = l.Client.Reason
	}
	fmt.Printf("%-8d %10.2f %12.0f %10.2f %10.2f %10.3f %10.3f %10.2f %10.1f  %s\n", n, float64(used.Microseconds())/got, r.OutputTokS,
		r.TTFT.P50, tt.P50, r.ITL.P50, it.P50, wait, l.Client.LagP99Ms, check)
	fmt.Printf("         reader: %s\n         chunk times: %s\n", l.Client.Reader, l.Client.ChunkTimes)
	return nil
}

// truth reads the simulator's trace: TTFT (from the kernel's receive time of the request to the first
// token's send) and ITL as the server sent them.
func truth(path string) (ttft, itl results.Dist, err error) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	var tt, it []float64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var r sim.TraceRecord
		if err = json.Unmarshal(sc.Bytes(), &r); err != nil {
			return
		}
		if r.Status != 200 || r.Fault != "" || len(r.TokenMs) < 3 {
			continue // the load's short calibration requests are not part of the measured load
		}
		// TTFT as a client sees it starts when the request reached the server's socket, not when
		// the server got round to reading it (a busy server's read delay is part of a user's wait).
		if r.Received.IsZero() {
			err = fmt.Errorf("%s: a request without a received time (no kernel timestamps): TTFT truth would miss the server's read delay", path)
			return
		}
		tt = append(tt, r.TTFTMs())
		for i := 1; i < len(r.TokenMs); i++ {
			it = append(it, r.TokenMs[i]-r.TokenMs[i-1])
		}
	}
	return metrics.Summarize(tt), metrics.Summarize(it), sc.Err()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitUp(url string) error {
	for range 200 {
		if resp, err := http.Get(url + "/v1/models"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("simulator at %s did not come up", url)
}

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hog spins on one core until killed, or until the harness that started it is gone (killed by a
// signal, e.g. SIGPIPE when its output is piped into head, it cannot kill the hog itself).
func hog() {
	runtime.GOMAXPROCS(1)
	parent := os.Getppid()
	for x := 1; ; x++ {
		if x&(1<<24-1) == 0 && os.Getppid() != parent {
			os.Exit(0)
		}
	}
}
