package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/engine"
	"github.com/gpuvet/gpuvet/internal/enginekind"
	"github.com/gpuvet/gpuvet/internal/functional"
	"github.com/gpuvet/gpuvet/internal/results"
)

// pythonWithAiohttp finds a python3 that can import aiohttp (the front's one dependency without
// torch), or skips: CI installs python3-aiohttp; a machine without it still runs every other test.
func pythonWithAiohttp(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the real Python front: end to end, go test without -short runs it")
	}
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import aiohttp").Run() == nil {
			return path
		}
	}
	t.Skip("no python3 with aiohttp (apt-get install python3-aiohttp): the transformers front's tests skip")
	return ""
}

// startFront launches the transformers kind's real template with the front's fake generator (no torch).
func startFront(t *testing.T, py string, maxLen int) *engine.Engine {
	t.Helper()
	dir := t.TempDir()
	tmpl := strings.Replace(enginekind.Get("transformers").Template, "python3", py, 1)
	e, err := engine.Start(engine.Spec{Kind: "transformers", Command: tmpl, ExtraArgs: []string{"--generator", "fake", "--fake-step-ms", "2"},
		Vars:    engine.Vars{Model: "gpuvet/fake", Port: 18600, GPUs: []int{0}, TP: 1, MaxModelLen: maxLen, GPUMemoryUtilization: 0.9},
		LogPath: filepath.Join(dir, "front.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(5 * time.Second) })
	if _, err := e.WaitReady(context.Background(), "gpuvet/fake", 60*time.Second); err != nil {
		t.Fatalf("front not ready: %v\n%s", err, e.LogTail(30))
	}
	if _, err := os.Stat(filepath.Join(dir, engine.FrontFile)); err != nil {
		t.Errorf("the front script was not written next to the log: %v", err)
	}
	return e
}

// The functional suite, unchanged, passes against the front: chat, max_tokens with finish_reason
// "length", [DONE], unknown model 4xx, context overflow 4xx, concurrent isolation.
func TestTransformersFrontPassesFunctionalSuite(t *testing.T) {
	py := pythonWithAiohttp(t)
	e := startFront(t, py, 512)
	f := functional.Run(context.Background(), functional.Options{URL: e.URL, Model: "gpuvet/fake", MaxModelLen: 512, Timeout: 20 * time.Second})
	if f.Status != results.StatusOK {
		t.Fatalf("functional suite: %s %s %+v\n%s", f.Status, f.Error, f.Tests, e.LogTail(30))
	}
	if len(f.Tests) != 7 {
		t.Fatalf("want 7 tests, got %+v", f.Tests)
	}
	// The greedy case compares the front's own token ids (return_token_ids), and the repeat agrees.
	if g := f.Greedy; g == nil || g.Basis != "token_ids" || g.RepeatDiff != nil || len(g.Outputs) == 0 || len(g.Outputs[0].TokenIDs) == 0 {
		t.Errorf("greedy case %+v", g)
	}
}

func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Header.Get("Content-Type"), "event-stream") {
		defer resp.Body.Close()
		var b []byte
		b, _ = readAll(resp)
		return resp, b
	}
	return resp, nil
}

func readAll(resp *http.Response) ([]byte, error) {
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
	}
	return []byte(sb.String()), sc.Err()
}

// Streaming: one chunk per token, the usage chunk with stream_options.include_usage, [DONE] last;
// ignore_eos keeps a request that would stop early going to max_tokens; unsupported parameters are
// refused with 400 naming them, never silently ignored.
func TestTransformersFrontStreamsAndRefusesWhatItLacks(t *testing.T) {
	py := pythonWithAiohttp(t)
	e := startFront(t, py, 256)
	resp, _ := post(t, e.URL+"/v1/completions", `{"model":"gpuvet/fake","prompt":"count","max_tokens":7,"stream":true,"stream_options":{"include_usage":true}}`)
	defer resp.Body.Close()
	var chunks []map[string]any
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		if line == "" {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		chunks = append(chunks, m)
	}
	if !done || len(chunks) != 7+2 {
		t.Fatalf("want 7 token chunks + finish + usage and [DONE], got %d chunks, done=%v: %v", len(chunks), done, chunks)
	}
	usage, _ := chunks[len(chunks)-1]["usage"].(map[string]any)
	if usage == nil || usage["completion_tokens"].(float64) != 7 || usage["prompt_tokens"].(float64) != 1 {
		t.Errorf("usage chunk: %v", chunks[len(chunks)-1])
	}
	if fr := chunks[len(chunks)-2]["choices"].([]any)[0].(map[string]any)["finish_reason"]; fr != "length" {
		t.Errorf("finish_reason %v, want length", fr)
	}

	// The fake stops a prompt ending in STOP after 3 tokens (EOS), unless ignore_eos.
	for _, c := range []struct {
		ignore bool
		want   float64
		finish string
	}{{false, 2, "stop"}, {true, 20, "length"}} {
		body := `{"model":"gpuvet/fake","prompt":"please STOP","max_tokens":20,"ignore_eos":` + map[bool]string{false: "false", true: "true"}[c.ignore] + `}`
		_, b := post(t, e.URL+"/v1/completions", body)
		var out struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			}
			Usage struct {
				CompletionTokens float64 `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("ignore_eos=%v: %s (%v)", c.ignore, b, err)
		}
		if out.Usage.CompletionTokens != c.want || out.Choices[0].FinishReason != c.finish {
			t.Errorf("ignore_eos=%v: %v tokens, finish %s; want %v, %s", c.ignore, out.Usage.CompletionTokens, out.Choices[0].FinishReason, c.want, c.finish)
		}
	}

	for _, c := range []struct{ body, param string }{
		{`{"model":"gpuvet/fake","prompt":"x","n":2}`, "n"},
		{`{"model":"gpuvet/fake","prompt":"x","temperature":0.7}`, "temperature"},
		{`{"model":"gpuvet/fake","prompt":"x","stop":["\n"]}`, "stop"},
		{`{"model":"gpuvet/fake","prompt":"x","max_tokens":0}`, "max_tokens"},
		{`{"model":"gpuvet/fake","prompt":{"a":1}}`, "prompt"},
	} {
		resp, b := post(t, e.URL+"/v1/completions", c.body)
		if resp.StatusCode != 400 || !strings.Contains(string(b), `"param": "`+c.param+`"`) {
			t.Errorf("%s: want 400 naming %s, got %d %s", c.body, c.param, resp.StatusCode, b)
		}
	}

	// The model's EOS that ignore_eos streamed past is in the timing line.
	if log, _ := os.ReadFile(e.LogPath); !strings.Contains(string(log), "finish=length max_tokens=20 ignore_eos=1 eos_tokens=1") {
		t.Errorf("no timing line with the EOS streamed past:\n%s", log)
	}

	// /tokenize counts like the generation path; /metrics carries the running gauge gpuvet scrapes.
	_, b := post(t, e.URL+"/tokenize", `{"model":"gpuvet/fake","prompt":"hello world"}`)
	if !strings.Contains(string(b), `"count": 2`) {
		t.Errorf("/tokenize: %s", b)
	}
	mr, err := http.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := readAll(mr)
	mr.Body.Close()
	if !strings.Contains(string(mb), "transformers_cb:num_requests_running 0") {
		t.Errorf("/metrics: %s", mb)
	}
	// The engine's own timing log: one line per finished request.
	log, _ := os.ReadFile(e.LogPath)
	if n := strings.Count(string(log), "gpuvet-front done "); n < 4 {
		t.Errorf("want a timing line per request in the log, got %d:\n%s", n, log)
	}
}

// The transformers template runs the embedded front with every value gpuvet plans, and names no
// placeholder the expander does not know.
func TestTransformersTemplate(t *testing.T) {
	argv, err := engine.Expand(enginekind.Get("transformers").Template, engine.Vars{Model: "/models/q3", Port: 8123, GPUs: []int{1}, TP: 1,
		MaxModelLen: 2048, GPUMemoryUtilization: 0.8, Front: "/out/logs/m/" + engine.FrontFile})
	if err != nil {
		t.Fatal(err)
	}
	want := "python3 /out/logs/m/gpuvet-transformers-front.py --model /models/q3 --host 127.0.0.1 --port 8123 --max-model-len 2048 --gpu-memory-utilization 0.8"
	if got := strings.Join(argv, " "); got != want {
		t.Errorf("argv %q\nwant %q", got, want)
	}
	if !strings.Contains(enginekind.Get("transformers").VersionCommand, "transformers.__version__") {
		t.Errorf("version command: %q", enginekind.Get("transformers").VersionCommand)
	}
	if !strings.Contains(string(engine.TransformersFront), "ContinuousBatchingManager") || !strings.Contains(enginekind.Get("transformers").APIGaps, "logprobs") {
		t.Error("the embedded front or the API-gap note is missing")
	}
}

// The front cancels in transformers only a request the engine still holds: cancelling one the
// engine finished (its client gone before the last tokens were written) made transformers free its
// KV blocks a second time ("CacheAllocator … attempted to free blocks for non-existent request_id",
// the H200 run of issue 41). The generator's dispatch and cancel run here against a stand-in
// manager, in the front's own Python.
func TestTransformersFrontCancelsOnlyOpenRequests(t *testing.T) {
	py := pythonWithAiohttp(t)
	dir := t.TempDir()
	front := filepath.Join(dir, "front.py")
	if err := os.WriteFile(front, engine.TransformersFront, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
import importlib.util, sys, threading
spec = importlib.util.spec_from_file_location("front", sys.argv[1])
front = importlib.util.module_from_spec(spec); spec.loader.exec_module(front)

class Out:
    def __init__(self, rid, toks, finished):
        self.request_id, self.generated_tokens, self.error, self._f = rid, toks, None, finished
    def is_finished(self):
        return self._f

class Manager:
    def __init__(self):
        self.cancelled, self.outs = [], []
    def cancel_request(self, rid):
        self.cancelled.append(rid)
    def get_result(self, timeout=None):
        return self.outs.pop(0) if self.outs else None
    def is_running(self):
        return True

g = object.__new__(front.TransformersGenerator)
g.manager, g.lock, g.callbacks = Manager(), threading.Lock(), {}
got = []
g.callbacks["open"] = [lambda *a: got.append(("open",) + a), 0]
g.callbacks["done"] = [lambda *a: got.append(("done",) + a), 0]
g.manager.outs = [Out("done", [5, 6], True), Out("open", [7], False)]
threading.Thread(target=g._dispatch, daemon=True).start()
import time
for _ in range(200):
    if len(got) == 2: break
    time.sleep(0.01)
assert len(got) == 2, got
assert g.cancel("done") is False, "a finished request was cancelled"
assert g.cancel("open") is True
assert g.cancel("open") is False, "cancelled twice"
assert g.manager.cancelled == ["open"], g.manager.cancelled
print("ok")
`
	out, err := exec.Command(py, "-c", script, front).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// A client that goes away mid-stream has its request cancelled in the engine, and the front's
// timing line says so with what the request asked for (finish=cancelled, max_tokens, ignore_eos), so
// an engine log read beside gpuvet's records tells a cut request from a short one.
func TestTransformersFrontLogsCancelledRequests(t *testing.T) {
	py := pythonWithAiohttp(t)
	e := startFront(t, py, 256)
	resp, err := http.Post(e.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"gpuvet/fake","prompt":"go","max_tokens":250,"ignore_eos":true,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		log, _ := os.ReadFile(e.LogPath)
		if strings.Contains(string(log), "finish=cancelled max_tokens=250 ignore_eos=1") {
			if strings.Contains(string(log), "non-existent") {
				t.Errorf("the engine was asked to cancel a request it no longer held:\n%s", log)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no finish=cancelled line:\n%s", e.LogTail(20))
}
