package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/engine"
	"github.com/gpuvet/gpuvet/internal/enginekind"
	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Over capacity, against the real front (its fake generator, 25 ms a step): 48 streams of 400 tokens
// each need 10 s, the rung lasts 3 s, so no request completes. The rung is measured, not failed
// (its output tok/s counts every token streamed in the window), and gpuvet's figure agrees with the
// front's own token count over the same window within 3 % (scripts/check_engine_timing.py, exact
// mode), where the old estimate from finished requests could not.
func TestOverCapacityRungAgreesWithEngineLog(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	py := pythonWithAiohttp(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "front.log")
	tmpl := strings.Replace(enginekind.Get("transformers").Template, "python3", py, 1)
	e, err := engine.Start(engine.Spec{Kind: "transformers", Command: tmpl, ExtraArgs: []string{"--generator", "fake", "--fake-step-ms", "25"},
		Vars:    engine.Vars{Model: "gpuvet/fake", Port: 18610, GPUs: []int{0}, TP: 1, MaxModelLen: 1024, GPUMemoryUtilization: 0.9},
		LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(5 * time.Second) })
	if _, err := e.WaitReady(context.Background(), "gpuvet/fake", 60*time.Second); err != nil {
		t.Fatalf("front not ready: %v\n%s", err, e.LogTail(30))
	}
	l, err := load.Run(context.Background(), load.Options{URL: e.URL, Model: "gpuvet/fake", Drain: time.Second,
		Config: results.LoadConfig{Profile: "throughput", MaxConcurrency: 48, PromptTokens: 32, OutputTokens: 400,
			MaxDuration: results.Duration(3 * time.Second), Warmup: "0"}})
	if err != nil {
		t.Fatalf("a rung over capacity is not an error: %v", err)
	}
	r := l.Runs[0]
	if r.Requests.Successful != 0 || r.Requests.Incomplete == 0 || r.Requests.Streamed < 40 || r.OutputTokS <= 0 {
		t.Fatalf("requests %+v, output %.0f tok/s: want none complete, the streams incomplete and counted", r.Requests, r.OutputTokS)
	}
	// Right after the cut: a rung whose window opens as the engine drops the cut requests. Tokens the
	// engine still makes for clients gone are not streamed, and the front does not count them.
	l2, err := load.Run(context.Background(), load.Options{URL: e.URL, Model: "gpuvet/fake", Drain: time.Second,
		Config: results.LoadConfig{Profile: "throughput", MaxConcurrency: 4, PromptTokens: 32, OutputTokens: 20,
			MaxDuration: results.Duration(3 * time.Second), Warmup: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	sum := results.Summary{Hosts: []results.Host{{Models: []results.Model{{Model: "gpuvet/fake",
		Endpoints: []results.Endpoint{{GPUs: []int{0}, Load: l, LogFile: logPath}, {GPUs: []int{0}, Load: l2, LogFile: logPath}}}}}}}
	b, _ := json.Marshal(sum)
	sp := filepath.Join(dir, "summary.json")
	if err := os.WriteFile(sp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the front's last token-total line
	script, _ := filepath.Abs("../../scripts/check_engine_timing.py")
	out, err := exec.Command(py, script, sp).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "| throughput c=48 |") || !strings.Contains(string(out), "| throughput c=4 |") {
		t.Fatalf("check_engine_timing.py: %v\n%s\n%s", err, out, e.LogTail(5))
	}
	t.Logf("\n%s", out)
}

// The long-context ladder against the real front, its fake engine holding 2,200 KV tokens: the
// front exports its cache's size, use and preemptions in the engine table's names, and the ladder
// finds its first preempting context where the KV arithmetic says (4 streams × (1,024 + 16) pass
// the 2,192 tokens of its 137 blocks of 16; 4 × (512 + 16) do not). Fails where the front exports
// none of it: the ladder then cannot say where preemption starts.
func TestFrontContextLadderFindsPreemption(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	py := pythonWithAiohttp(t)
	tmpl := strings.Replace(enginekind.Get("transformers").Template, "python3", py, 1)
	e, err := engine.Start(engine.Spec{Kind: "transformers", Command: tmpl,
		ExtraArgs: []string{"--generator", "fake", "--fake-step-ms", "2", "--fake-kv-tokens", "2200"},
		Vars:      engine.Vars{Model: "gpuvet/fake", Port: 18620, GPUs: []int{0}, TP: 1, MaxModelLen: 2048, GPUMemoryUtilization: 0.9},
		LogPath:   filepath.Join(t.TempDir(), "front.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(5 * time.Second) })
	if _, err := e.WaitReady(context.Background(), "gpuvet/fake", 60*time.Second); err != nil {
		t.Fatalf("front not ready: %v\n%s", err, e.LogTail(30))
	}
	l, err := load.Run(context.Background(), load.Options{URL: e.URL, Model: "gpuvet/fake", Drain: time.Second, ScrapeMetrics: true,
		Config: results.LoadConfig{Profile: "concurrency", Concurrency: 4, Workload: "long-context", PromptTokens: 128, OutputTokens: 16,
			MaxDuration: results.Duration(time.Second), MinSamples: 4, Warmup: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	c := l.Context
	if c == nil {
		t.Fatal("no context ladder")
	}
	t.Logf("%+v", *c)
	for i, r := range l.Runs {
		if r.Preemptions == nil {
			t.Errorf("rung %d: no preemption count read from the front", i)
		}
	}
	if c.KVCapacityTokens != 2192 || c.FirstPreempting != 1024 || c.FirstKVBound != 1024 || c.LongestClean != 512 || c.ExpectedFirstPreempting != 1024 {
		t.Errorf("ladder %+v: want the 2192-token cache read, 512 clean, 1024 the first preempting as the arithmetic says", *c)
	}
}

// A context length its KV cache cannot hold: the front refuses to start, as vLLM does, naming both
// and what to change (one such request stopped transformers' whole engine on the H200).
func TestFrontRefusesAContextItsCacheCannotHold(t *testing.T) {
	py := pythonWithAiohttp(t)
	tmpl := strings.Replace(enginekind.Get("transformers").Template, "python3", py, 1)
	e, err := engine.Start(engine.Spec{Kind: "transformers", Command: tmpl,
		ExtraArgs: []string{"--generator", "fake", "--fake-kv-tokens", "1000"},
		Vars:      engine.Vars{Model: "gpuvet/fake", Port: 18630, GPUs: []int{0}, TP: 1, MaxModelLen: 2048, GPUMemoryUtilization: 0.9},
		LogPath:   filepath.Join(t.TempDir(), "front.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(5 * time.Second) })
	if _, err := e.WaitReady(context.Background(), "gpuvet/fake", 30*time.Second); err == nil {
		t.Fatal("the front served a max_model_len of 2048 over a 992-token cache")
	}
	if tail := e.LogTail(10); !strings.Contains(tail, "max_model_len 2048 is more than the 992 tokens this GPU's KV cache holds (62 blocks of 16)") {
		t.Errorf("log: %s", tail)
	}
}
