package sim

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func streamBody(n int) map[string]any {
	return map[string]any{"prompt": "fault test", "max_tokens": n, "ignore_eos": true, "stream": true}
}

func faultCfg(f Faults) Config {
	return Config{Model: "m", TTFT: 5 * time.Millisecond, ITL: 2 * time.Millisecond, Faults: f, Seed: 3}
}

func TestFaultHTTPErrors(t *testing.T) {
	for _, c := range []struct {
		f      Faults
		status int
		typ    string
	}{
		{Faults{Rate5xx: 1}, 500, "InternalServerError"},
		{Faults{Rate429: 1}, 429, "TooManyRequestsError"},
	} {
		s := start(t, faultCfg(c.f))
		r := streamReq(t, s.URL()+"/v1/completions", streamBody(5))
		var e struct{ Error struct{ Type string } }
		json.Unmarshal(r.body, &e)
		if r.status != c.status || e.Error.Type != c.typ {
			t.Errorf("%+v: status %d body %s", c.f, r.status, r.body)
		}
	}
}

// A rate is a rate: about that fraction fails, and the same seed fails the same requests.
func TestFaultRateDeterministic(t *testing.T) {
	pattern := func() string {
		s := start(t, faultCfg(Faults{Rate5xx: 0.3, Rate429: 0.2}))
		var b strings.Builder
		for range 100 {
			resp, _ := post(t, s.URL()+"/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1})
			b.WriteByte("0123456789"[resp.StatusCode/100])
		}
		return b.String()
	}
	p1, p2 := pattern(), pattern()
	if p1 != p2 {
		t.Errorf("same seed, different faults:\n%s\n%s", p1, p2)
	}
	if n5, n4 := strings.Count(p1, "5"), strings.Count(p1, "4"); n5 < 15 || n5 > 45 || n4 < 8 || n4 > 35 {
		t.Errorf("30 %% 5xx and 20 %% 429 over 100 requests gave %d and %d", n5, n4)
	}
}

func TestFaultCutStream(t *testing.T) {
	s := start(t, faultCfg(Faults{CutRate: 1}))
	r := streamReq(t, s.URL()+"/v1/completions", streamBody(20))
	if r.done || r.err == nil {
		t.Fatalf("cut stream: done %v err %v (want no [DONE] and a read error)", r.done, r.err)
	}
	if n := len(r.contentEvents()); n < 1 || n >= 20 {
		t.Errorf("cut mid-way: got %d of 20 tokens", n)
	}
}

func TestFaultStall(t *testing.T) {
	s := start(t, faultCfg(Faults{StallRate: 1, Stall: 300 * time.Millisecond}))
	r := streamReq(t, s.URL()+"/v1/completions", streamBody(10))
	ce := r.contentEvents()
	if !r.done || len(ce) != 10 {
		t.Fatalf("done %v, %d tokens", r.done, len(ce))
	}
	var maxGap time.Duration
	prev := time.Duration(0)
	for _, e := range ce {
		maxGap = max(maxGap, e.at-prev)
		prev = e.at
	}
	if maxGap < 300*time.Millisecond {
		t.Errorf("largest gap %v, want ≥ the 300ms stall", maxGap)
	}
}

func TestFaultMalformed(t *testing.T) {
	s := start(t, faultCfg(Faults{MalformedRate: 1}))
	r := streamReq(t, s.URL()+"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}},
		"max_tokens": 6, "ignore_eos": true, "stream": true})
	bad := 0
	for _, e := range r.events {
		if e.bad {
			bad++
		}
	}
	if bad != 1 || len(r.contentEvents()) != 6 || !r.done {
		t.Errorf("%d malformed events (want 1), %d tokens (want 6), done %v", bad, len(r.contentEvents()), r.done)
	}
}

func TestFaultSlowStart(t *testing.T) {
	s := start(t, faultCfg(Faults{SlowStart: 300 * time.Millisecond}))
	resp, _ := getBody(t, s.URL()+"/health")
	if resp.StatusCode != 503 {
		t.Errorf("health during slow start: %d, want 503", resp.StatusCode)
	}
	time.Sleep(350 * time.Millisecond)
	if resp, _ := getBody(t, s.URL()+"/health"); resp.StatusCode != 200 {
		t.Errorf("health after slow start: %d", resp.StatusCode)
	}
}

func TestFaultStraggler(t *testing.T) {
	f, err := NewFleet(FleetConfig{GPU: "H100", Count: 2, StragglerIndex: 1, StragglerPct: 50})
	if err != nil {
		t.Fatal(err)
	}
	// Fixed mode: the straggler's latencies stretch by 1/speed.
	cfg := Config{Model: "m", TTFT: 40 * time.Millisecond, ITL: 10 * time.Millisecond, Fleet: f, GPUIndex: 1}
	s := start(t, cfg)
	if s.cfg.TTFT != 80*time.Millisecond || s.cfg.ITL != 20*time.Millisecond {
		t.Errorf("straggler fixed latencies %v/%v, want 80ms/20ms", s.cfg.TTFT, s.cfg.ITL)
	}
	r := streamReq(t, s.URL()+"/v1/completions", streamBody(3))
	if ce := r.contentEvents(); len(ce) != 3 || ce[0].at < 80*time.Millisecond {
		t.Errorf("straggler first token at %v", ce[0].at)
	}
	// Engine mode: every step of the straggler's engine takes twice as long.
	healthy := start(t, Config{GPU: "H100", Model: "Qwen/Qwen3-8B", Fleet: f, GPUIndex: 0})
	slow := start(t, Config{GPU: "H100", Model: "Qwen/Qwen3-8B", Fleet: f, GPUIndex: 1})
	b := Batch{Tokens: 64, Seqs: 64, AttnCtx: 64 * 300, KVRead: 64 * 300}
	if h, s := healthy.perf.StepTime(b), slow.perf.StepTime(b); s != 2*h {
		t.Errorf("straggler step %v, healthy %v: want twice", s, h)
	}
}

func TestTraceGroundTruth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	cfg := fixedCfg()
	cfg.Trace = fh
	s, err := Listen(cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := streamReq(t, s.URL()+"/v1/completions", map[string]any{"prompt": "trace me please", "max_tokens": 8, "ignore_eos": true, "stream": true})
	post(t, s.URL()+"/v1/completions", map[string]any{"prompt": "and me", "max_tokens": 3, "ignore_eos": true})
	post(t, s.URL()+"/v1/chat/completions", map[string]any{"model": "wrong"})
	s.Close()
	b, _ := os.ReadFile(path)
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) != 3 || !bytes.Contains(lines[2], []byte(`"status":400`)) {
		t.Fatalf("%d trace lines, want 3, the last a 400:\n%s", len(lines), b)
	}
	var rec TraceRecord
	if err := json.Unmarshal(lines[0], &rec); err != nil {
		t.Fatal(err)
	}
	if rec.ID != 1 || !rec.Stream || rec.PromptTokens != Count("trace me please") || rec.CompletionTokens != 8 || len(rec.TokenMs) != 8 {
		t.Fatalf("record %+v", rec)
	}
	// The ground truth: tokens leave at TTFT + k·ITL (never early), and the client sees each one
	// after the server sent it.
	ce := r.contentEvents()
	for k, ms := range rec.TokenMs {
		if sched := 50 + 10*float64(k); ms < sched-0.01 {
			t.Errorf("token %d left at %.2f ms, before its schedule %.0f ms", k+1, ms, sched)
		}
		if client := float64(ce[k].at) / 1e6; client+1 < ms {
			t.Errorf("token %d: client saw it at %.2f ms, server sent it at %.2f ms", k+1, client, ms)
		}
	}
}

func TestFaultConfigErrors(t *testing.T) {
	for _, c := range []struct {
		f    Faults
		want string
	}{
		{Faults{Rate5xx: 1.5}, "fault-5xx"},
		{Faults{Rate5xx: 0.6, Rate429: 0.6}, "together"},
		{Faults{StallRate: 0.1}, "fault-stall-for"},
		{Faults{CutRate: -1}, "fault-cut"},
	} {
		_, err := NewServer(Config{Model: "m", TTFT: time.Millisecond, Faults: c.f})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.f, err, c.want)
		}
	}
}

// A client that hangs up mid-stream frees its slot: the engine drops the sequence, the trace says so.
func TestClientGoneFreesEngine(t *testing.T) {
	var trace bytes.Buffer
	for _, cfg := range []Config{
		{Model: "m", TTFT: time.Millisecond, ITL: 5 * time.Millisecond},
		{GPU: "H100", Model: "Qwen/Qwen3-8B"},
	} {
		trace.Reset()
		cfg.Trace = &lockedBuf{b: &trace}
		s := start(t, cfg)
		b, _ := json.Marshal(map[string]any{"model": cfg.Model, "prompt": "long one", "max_tokens": 5000, "ignore_eos": true, "stream": true})
		resp, err := http.Post(s.URL()+"/v1/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2048)
		resp.Body.Read(buf) // at least one chunk
		resp.Body.Close()
		deadline := time.Now().Add(3 * time.Second)
		for {
			running, waiting, _ := s.drv.stats()
			if running == 0 && waiting == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %d running, %d waiting after the client left", cfg.Model, running, waiting)
			}
			time.Sleep(10 * time.Millisecond)
		}
		s.Close()
		if !strings.Contains(trace.String(), `"fault":"client_gone"`) {
			t.Errorf("%s: trace lacks client_gone: %s", cfg.Model, trace.String())
		}
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestJitterBoundsAndSeed(t *testing.T) {
	gaps := func(seed uint64) []time.Duration {
		rng := rand.New(rand.NewPCG(seed, 1))
		var out []time.Duration
		for range 2000 {
			out = append(out, jittered(10*time.Millisecond, 0.3, rng))
		}
		return out
	}
	a, b, c := gaps(1), gaps(1), gaps(2)
	var sum time.Duration
	lo, hi := time.Hour, time.Duration(0)
	for i, g := range a {
		if g != b[i] {
			t.Fatal("same seed, different jitter")
		}
		sum += g
		lo, hi = min(lo, g), max(hi, g)
	}
	if lo < 7*time.Millisecond || hi > 13*time.Millisecond || lo > 7500*time.Microsecond || hi < 12500*time.Microsecond {
		t.Errorf("jitter 0.3 on 10ms spans %v–%v, want about 7–13ms", lo, hi)
	}
	if mean := sum / 2000; mean < 9800*time.Microsecond || mean > 10200*time.Microsecond {
		t.Errorf("mean gap %v, want ≈ 10ms", mean)
	}
	if a[0] == c[0] && a[1] == c[1] {
		t.Error("different seeds gave the same jitter")
	}
	if jittered(10*time.Millisecond, 0, nil) != 10*time.Millisecond {
		t.Error("no jitter must give the exact latency")
	}
	// The server wires it: a fixed server with jitter gets a per-request generator.
	s := start(t, Config{Model: "m", TTFT: time.Millisecond, ITL: time.Millisecond, Jitter: 0.5, Seed: 4})
	r := streamReq(t, s.URL()+"/v1/completions", streamBody(5))
	if !r.done || len(r.contentEvents()) != 5 {
		t.Errorf("jittered stream: done %v, %d tokens", r.done, len(r.contentEvents()))
	}
	if resp, body := getBody(t, s.URL()+"/no/such/path"); resp.StatusCode != 404 || !strings.Contains(string(body), `"detail":"Not Found"`) {
		t.Errorf("unknown path: %d %s", resp.StatusCode, body)
	}
}

// Issue 33: the correctness faults' settings, and what they do to the fleet.
func TestCorruptAndThrottleSettings(t *testing.T) {
	for _, bad := range []FleetConfig{{Corrupt: "4"}, {Corrupt: "x"}, {Throttle: "4"}, {Throttle: "1:too_hot"}, {Throttle: "1:hw_slowdown:5s-2s"}} {
		bad.GPU, bad.Count, bad.StragglerIndex = "H200", 4, -1
		if _, err := NewFleet(bad); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
	f, err := NewFleet(FleetConfig{GPU: "H200", Count: 4, StragglerIndex: -1, Corrupt: "1", Throttle: "2:hw_power_brake_slowdown"})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Corrupt(1) || f.Corrupt(0) || f.Mismatch(0, "burn", CorruptEvery, 2*CorruptFrom) || !f.Mismatch(1, "burn", CorruptEvery, 2*CorruptFrom) ||
		f.Mismatch(1, "burn", CorruptEvery, CorruptFrom/2) || f.Mismatch(1, "sgemm_fp32", 1, 0) || !f.Mismatch(1, "gemm_bf16", 1, 0) {
		t.Error("corrupt GPU 1: wrong mismatch pattern")
	}
	if f.ThrottleSpeed(2) != ThrottleSpeed || f.ThrottleSpeed(0) != 1 || f.Speed(2) != 1 {
		t.Errorf("speeds %v %v", f.Speed(2), f.Speed(0))
	}
	if err := f.Load(2, time.Second); err != nil {
		t.Fatal(err)
	}
	s, _ := f.Sample(2)
	if s.ClockReasons != 0x80 || s.SMClockMHz > int(float64(f.maxClock())*ThrottleSpeed) {
		t.Errorf("throttled sample %+v, want hw_power_brake_slowdown (0x80) and cut clocks", s)
	}
	if s, _ := f.Sample(0); s.ClockReasons&0x80 != 0 {
		t.Errorf("healthy GPU sample %+v", s)
	}
	// The inventory names the reason as NVML's reader does (it once named only gpu_idle and
	// sw_power_cap, leaving a throttled GPU's mask unnamed).
	gs, err := f.GPUs()
	if err != nil {
		t.Fatal(err)
	}
	if ev := gs[2].ClockEvents; ev.Mask != 0x80 || !slices.Equal(ev.Names, []string{"hw_power_brake_slowdown"}) {
		t.Errorf("throttled GPU's inventory clock events %+v, want 0x80 named hw_power_brake_slowdown", ev)
	}
}
