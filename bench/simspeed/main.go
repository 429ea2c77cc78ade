// Command simspeed measures how much streaming the simulator serves on one core: N concurrent
// streams in fixed mode, one token per SSE chunk, the server in a child process with GOMAXPROCS=1
// (and pinned to one CPU with sched_setaffinity when -pin is given), the load in this process on the
// other cores. It prints tokens/s received, the server's CPU use, and the client-side ITL.
//
//	go run ./bench/simspeed -streams 2000 -itl 20ms -duration 15s
//
// Target (issue 2): 2,000 concurrent streams and 100,000 streamed tokens/s with the server on at
// most one core.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpuvet/gpuvet/internal/sim"
)

func main() {
	serve := flag.Bool("serve", false, "internal: run the server (child process)")
	streams := flag.Int("streams", 2000, "concurrent streams")
	itl := flag.Duration("itl", 20*time.Millisecond, "fixed inter-token latency")
	ttft := flag.Duration("ttft", 50*time.Millisecond, "fixed time to first token")
	dur := flag.Duration("duration", 15*time.Second, "measured window")
	warm := flag.Duration("warmup", 3*time.Second, "time after the last stream opened before measuring")
	pin := flag.Int("pin", -1, "pin the server to this CPU with taskset (-1: do not pin; GOMAXPROCS=1 still holds)")
	trace := flag.String("trace", "", "internal: the server's trace file")
	prof := flag.String("cpuprofile", "", "write the server's CPU profile to this file")
	flag.Parse()
	if *serve {
		if *prof != "" {
			f, err := os.Create(*prof)
			if err == nil {
				pprof.StartCPUProfile(f)
				defer pprof.StopCPUProfile()
			}
		}
		runServer(*ttft, *itl, *trace)
		return
	}
	if err := runLoad(*streams, *itl, *ttft, *dur, *warm, *pin, *prof); err != nil {
		fmt.Fprintln(os.Stderr, "simspeed:", err)
		os.Exit(1)
	}
}

func runServer(ttft, itl time.Duration, trace string) {
	cfg := sim.Config{Model: "bench", TTFT: ttft, ITL: itl}
	if trace != "" {
		f, err := os.Create(trace)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		cfg.Trace = f
	}
	s, err := sim.Listen(cfg, "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(s.URL())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	<-ch
	s.Close()
}

// cpuSeconds is a process's user and system CPU time from /proc/PID/stat.
func cpuSeconds(pid int) (user, sys float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return ut / 100, st / 100 // USER_HZ is 100 on Linux
}

func runLoad(n int, itl, ttft, window, warm time.Duration, pin int, prof string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tdir, err := os.MkdirTemp("", "simspeed")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tdir)
	tracePath := tdir + "/trace.jsonl"
	args := []string{self, "-serve", "-itl", itl.String(), "-ttft", ttft.String(), "-trace", tracePath, "-cpuprofile", prof}
	if pin >= 0 {
		// taskset pins every thread the server will ever start to one CPU, and keeps every thread
		// of this load process off it.
		args = append([]string{"taskset", "-c", strconv.Itoa(pin)}, args...)
		var others []string
		for c := range runtime.NumCPU() {
			if c != pin {
				others = append(others, strconv.Itoa(c))
			}
		}
		if out, err := exec.Command("taskset", "-a", "-p", "-c", strings.Join(others, ","), strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
			return fmt.Errorf("pin the load away from CPU %d: %w: %s", pin, err, out)
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
	}
	defer stop()
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("server did not start: %w", err)
	}
	url = strings.TrimSpace(url)
	tr := &http.Transport{MaxIdleConnsPerHost: n, DialContext: (&net.Dialer{}).DialContext, DisableCompression: true}
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Each stream asks for more tokens than the run needs, so all stay open through the window.
	maxTok := int((warm+window+10*time.Second)/itl) + 100
	body := fmt.Sprintf(`{"model":"bench","prompt":"speed test","max_tokens":%d,"ignore_eos":true,"stream":true}`, maxTok)
	var (
		tokens   atomic.Int64
		open     atomic.Int64
		errs     atomic.Int64
		measure  atomic.Bool
		gapsMu   sync.Mutex
		gaps     []time.Duration
		firstErr atomic.Value
	)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				return
			}
			defer resp.Body.Close()
			open.Add(1)
			defer open.Add(-1)
			r := bufio.NewReaderSize(resp.Body, 16<<10)
			var last time.Time
			sample := i%20 == 0 // ITL from one stream in 20 keeps the client light
			var local []time.Duration
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					break
				}
				if !bytes.HasPrefix(line, []byte("data: {")) {
					continue
				}
				if measure.Load() {
					tokens.Add(1)
					if sample {
						now := time.Now()
						if !last.IsZero() {
							local = append(local, now.Sub(last))
						}
						last = now
					}
				}
			}
			gapsMu.Lock()
			gaps = append(gaps, local...)
			gapsMu.Unlock()
		}()
		if i%100 == 99 {
			time.Sleep(5 * time.Millisecond) // open connections in waves, not one SYN flood
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for open.Load()+errs.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(warm)
	u0, s0 := cpuSeconds(cmd.Process.Pid)
	t0 := time.Now()
	measure.Store(true)
	time.Sleep(window)
	measure.Store(false)
	el := time.Since(t0)
	u1, s1 := cpuSeconds(cmd.Process.Pid)
	got, stillOpen := tokens.Load(), open.Load()
	cancel()
	wg.Wait()
	stop()
	late, err := lateness(tracePath, ttft, itl)
	if err != nil {
		return err
	}

	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	pct := func(p float64) time.Duration {
		if len(gaps) == 0 {
			return 0
		}
		return gaps[min(len(gaps)-1, int(p*float64(len(gaps))))]
	}
	target := float64(n) / itl.Seconds()
	fmt.Printf("simspeed: %d streams (%d open through the window, %d failed), fixed ITL %v, one token per chunk\n", n, stillOpen, errs.Load(), itl)
	if e := firstErr.Load(); e != nil {
		fmt.Printf("  first error: %v\n", e)
	}
	fmt.Printf("  streamed tokens/s     %9.0f  (offered %0.f: %.1f %%)\n", float64(got)/el.Seconds(), target, 100*float64(got)/el.Seconds()/target)
	fmt.Printf("  server CPU            %9.1f %% of one core (user %.1f %%, kernel %.1f %%; GOMAXPROCS=1, pinned to CPU %d; -1: not pinned)\n",
		100*(u1-u0+s1-s0)/el.Seconds(), 100*(u1-u0)/el.Seconds(), 100*(s1-s0)/el.Seconds(), pin)
	fmt.Printf("  client ITL p50/p99/max %v / %v / %v  (%d gaps sampled)\n", pct(0.5).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), pct(1).Round(10*time.Microsecond), len(gaps))
	fmt.Printf("  server send lateness vs schedule p50/p99/max %v / %v / %v  (%d tokens, from the server's --trace)\n",
		late[0].Round(10*time.Microsecond), late[1].Round(10*time.Microsecond), late[2].Round(10*time.Microsecond), int(late[3]))
	fmt.Printf("  window %v, load side GOMAXPROCS=%d (off the server's CPU when pinned)\n", el.Round(time.Millisecond), runtime.GOMAXPROCS(0))
	return nil
}

// lateness reads the server's trace and returns p50, p99, max of how late each token left against
// its fixed schedule (TTFT + k·ITL after arrival), and the number of tokens.
func lateness(path string, ttft, itl time.Duration) ([4]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return [4]time.Duration{}, err
	}
	defer f.Close()
	var late []time.Duration
	dec := json.NewDecoder(f)
	for {
		var r sim.TraceRecord
		if err := dec.Decode(&r); err != nil {
			break
		}
		for k, ms := range r.TokenMs {
			late = append(late, time.Duration(ms*1e6)-ttft-time.Duration(k)*itl)
		}
	}
	if len(late) == 0 {
		return [4]time.Duration{}, fmt.Errorf("trace %s: no tokens", path)
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	return [4]time.Duration{late[len(late)/2], late[len(late)*99/100], late[len(late)-1], time.Duration(len(late))}, nil
}
