package engine

import (
	"github.com/gpuvet/gpuvet/internal/enginekind"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary plays three roles, chosen by GPUVET_ENGINE_TEST_ROLE:
//   - "server": a fake engine that answers chat completions, prints its secret env to its log, and
//     forks a grandchild (the "sleeper") into its process group, like a real engine's workers;
//   - "sleeper": sleeps;
//   - "parent": a miniature gpuvet run that starts a "server" engine and ends per GPUVET_ENGINE_TEST_MODE.
func TestMain(m *testing.M) {
	switch os.Getenv("GPUVET_ENGINE_TEST_ROLE") {
	case "server":
		fakeServer()
	case "sleeper":
		time.Sleep(time.Hour)
		os.Exit(0)
	case "parent":
		os.Exit(parent())
	case "crash":
		fmt.Println("loading model weights")
		fmt.Fprintln(os.Stderr, "CUDA error: out of memory; token=", os.Getenv("HF_TOKEN"))
		os.Exit(3)
	case "deaf":
		// Opens the port but never completes: readiness must not trust an open port.
		port := os.Args[len(os.Args)-1]
		http.ListenAndServe("127.0.0.1:"+port, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(503)
		}))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fakeServer() {
	port := os.Args[len(os.Args)-1]
	fmt.Printf("starting with HF_TOKEN=%s CUDA_VISIBLE_DEVICES=%s\n", os.Getenv("HF_TOKEN"), os.Getenv("CUDA_VISIBLE_DEVICES"))
	sl := exec.Command(os.Args[0])
	sl.Env = append(os.Environ(), "GPUVET_ENGINE_TEST_ROLE=sleeper")
	if err := sl.Start(); err != nil {
		fmt.Println("sleeper:", err)
		os.Exit(1)
	}
	if f := os.Getenv("GPUVET_ENGINE_TEST_PIDS"); f != "" {
		os.WriteFile(f, []byte(strconv.Itoa(sl.Process.Pid)), 0o644)
	}
	// Ignore SIGTERM like a stubborn engine: Stop must escalate to SIGKILL.
	signal.Ignore(syscall.SIGTERM)
	http.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]string{"content": "OK"}}}})
	})
	http.ListenAndServe("127.0.0.1:"+port, nil)
	os.Exit(1)
}

// parent starts an engine and ends per mode; it writes "pgid" to GPUVET_ENGINE_TEST_READY when serving.
func parent() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer StopAll(300 * time.Millisecond)
	command := os.Args[0] + " {port}"
	if os.Getenv("GPUVET_ENGINE_TEST_SHELL") != "" {
		// A launcher shell that forks like vLLM and SGLang do: background jobs, then the server.
		command = "sh -c 'sleep 1000 & sleep 1000 & exec " + os.Args[0] + " {port}'"
	}
	e, err := Start(Spec{
		Kind: "generic", Command: command, Vars: Vars{Model: "m", Port: 18100, GPUs: []int{0}},
		Env: map[string]string{"GPUVET_ENGINE_TEST_ROLE": "server"}, LogPath: os.Getenv("GPUVET_ENGINE_TEST_LOG"),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := e.WaitReady(ctx, "m", 20*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.WriteFile(os.Getenv("GPUVET_ENGINE_TEST_READY"), []byte(strconv.Itoa(e.PID())), 0o644)
	// Wait for the test to see the processes alive (or to signal us).
	for {
		if _, err := os.Stat(os.Getenv("GPUVET_ENGINE_TEST_READY") + ".go"); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	switch os.Getenv("GPUVET_ENGINE_TEST_MODE") {
	case "success":
		e.Stop(300 * time.Millisecond)
		return 0
	case "failure":
		return 1 // the deferred StopAll must clean up
	case "panic":
		defer func() { recover() }()
		panic("boom")
	}
	<-ctx.Done() // signal modes
	return 130
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie (state Z) is dead: only its parent has not reaped it yet.
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

func TestNoChildSurvives(t *testing.T) {
	for _, mode := range []string{"success", "failure", "panic", "SIGINT", "SIGTERM"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			ready, pids := filepath.Join(dir, "ready"), filepath.Join(dir, "pids")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "GPUVET_ENGINE_TEST_ROLE=parent", "GPUVET_ENGINE_TEST_MODE="+mode,
				"GPUVET_ENGINE_TEST_READY="+ready, "GPUVET_ENGINE_TEST_PIDS="+pids,
				"GPUVET_ENGINE_TEST_LOG="+filepath.Join(dir, "engine.log"), "HF_TOKEN=hf_abcdefghijklmnopqrstuvwx")
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pgid int
			deadline := time.Now().Add(30 * time.Second)
			for pgid == 0 && time.Now().Before(deadline) {
				if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
					pgid, _ = strconv.Atoi(string(b))
				}
				time.Sleep(20 * time.Millisecond)
			}
			if pgid == 0 {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("engine never became ready: %s", out)
			}
			sb, _ := os.ReadFile(pids)
			sleeper, _ := strconv.Atoi(string(sb))
			if sleeper == 0 || !alive(sleeper) || !alive(pgid) {
				t.Fatalf("helper processes not running (engine %d, grandchild %d)", pgid, sleeper)
			}
			os.WriteFile(ready+".go", nil, 0o644)
			switch mode {
			case "SIGINT":
				cmd.Process.Signal(os.Interrupt)
			case "SIGTERM":
				cmd.Process.Signal(syscall.SIGTERM)
			}
			cmd.Wait()
			for _, pid := range []int{pgid, sleeper} {
				for i := 0; i < 100 && alive(pid); i++ {
					time.Sleep(20 * time.Millisecond)
				}
				if alive(pid) {
					syscall.Kill(-pgid, syscall.SIGKILL)
					t.Fatalf("process %d survived %s", pid, mode)
				}
			}
			log, _ := os.ReadFile(filepath.Join(dir, "engine.log"))
			if strings.Contains(string(log), "hf_abcdefghijklmnopqrstuvwx") || !strings.Contains(string(log), "HF_TOKEN=[REDACTED]") {
				t.Errorf("engine log not redacted:\n%s", log)
			}
		})
	}
}

// An engine that exits 0 before it serves says so, not "<nil>".
func TestReadinessExitZeroSaysItsStatus(t *testing.T) {
	e, err := Start(Spec{Kind: "generic", Command: "true {port}", Vars: Vars{Model: "m", Port: 18301}, LogPath: filepath.Join(t.TempDir(), "e.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop(time.Second)
	_, err = e.WaitReady(context.Background(), "m", 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "engine exited before serving (exit status 0)") {
		t.Fatalf("an engine that exits 0 at once: %v", err)
	}
}

func TestReadinessFailureKeepsLogTail(t *testing.T) {
	t.Setenv("HF_TOKEN", "hf_zyxwvutsrqponmlkjihgfe")
	dir := t.TempDir()
	e, err := Start(Spec{Kind: "generic", Command: os.Args[0] + " {port}", Vars: Vars{Model: "m", Port: 18300},
		Env: map[string]string{"GPUVET_ENGINE_TEST_ROLE": "crash"}, LogPath: filepath.Join(dir, "e.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop(time.Second)
	_, err = e.WaitReady(context.Background(), "m", 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited before serving") {
		t.Fatalf("want an early exit error, got %v", err)
	}
	tail := e.LogTail(20)
	if !strings.Contains(tail, "out of memory") || strings.Contains(tail, "hf_zyx") {
		t.Errorf("tail: %q", tail)
	}
}

func TestTokenEnvIsPassedAsHFTokenAndRedacted(t *testing.T) {
	t.Setenv("MY_HUB_CRED", "s3cr3t-v4lue-xyz")
	dir := t.TempDir()
	e, err := Start(Spec{Kind: "generic", Command: "sh -c 'echo token is $HF_TOKEN; echo port {port}'", Vars: Vars{Model: "m", Port: 18500},
		TokenEnv: "MY_HUB_CRED", LogPath: filepath.Join(dir, "e.log")})
	if err != nil {
		t.Fatal(err)
	}
	e.WaitReady(context.Background(), "m", time.Second)
	e.Stop(time.Second)
	log, _ := os.ReadFile(filepath.Join(dir, "e.log"))
	if !strings.Contains(string(log), "token is [REDACTED]") || strings.Contains(string(log), "s3cr3t") {
		t.Errorf("log:\n%s", log)
	}
}

func TestReadinessNeedsARealCompletion(t *testing.T) {
	dir := t.TempDir()
	e, err := Start(Spec{Kind: "generic", Command: os.Args[0] + " {port}", Vars: Vars{Model: "m", Port: 18400},
		Env: map[string]string{"GPUVET_ENGINE_TEST_ROLE": "deaf"}, LogPath: filepath.Join(dir, "e.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop(time.Second)
	_, err = e.WaitReady(context.Background(), "m", 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "not serving after") || !strings.Contains(err.Error(), "HTTP 503") {
		t.Fatalf("an open port that never completes must time out, got %v", err)
	}
}

func TestExpand(t *testing.T) {
	v := Vars{Model: "Qwen/Qwen3-8B", Port: 8001, GPUs: []int{2, 3}, TP: 2, MaxModelLen: 1024, GPUMemoryUtilization: 0.9}
	tests := []struct {
		tmpl string
		want string
		err  string
	}{
		{enginekind.Get("vllm").Template, "vllm|serve|Qwen/Qwen3-8B|--host|127.0.0.1|--port|8001|--tensor-parallel-size|2|--max-model-len|1024|--gpu-memory-utilization|0.9", ""},
		{`srv --name "a b" --gpu={gpu} '{model}'`, "srv|--name|a b|--gpu=2,3|Qwen/Qwen3-8B", ""},
		{`srv --x {mdl}`, "", "unknown placeholder {mdl}"},
		{`srv "open`, "", "unclosed"},
		{`  `, "", "empty command"},
		{`srv --json {"a":1}`, `srv|--json|{a:1}`, ""},
	}
	for _, tt := range tests {
		got, err := Expand(tt.tmpl, v)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Expand(%q): want error %q, got %v", tt.tmpl, tt.err, err)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != tt.want {
			t.Errorf("Expand(%q) = %q, %v", tt.tmpl, strings.Join(got, "|"), err)
		}
	}
}

func TestRedactor(t *testing.T) {
	r := NewRedactor([]string{"HF_TOKEN=supersecretvalue1", "PATH=/usr/bin", "MY_API_KEY=abcdef123"})
	tests := []struct{ in, want string }{
		{"token supersecretvalue1 here", "token [REDACTED] here"},
		{"key=abcdef123", "key=[REDACTED]"},
		{"Authorization: Bearer eyJhbGciOi.xyz", "Authorization: Bearer [REDACTED]"},
		{"hf_ABCDEFGHIJKLMNOPQRSTUV ok", "[REDACTED] ok"},
		{"path /usr/bin stays", "path /usr/bin stays"},
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{`a "b c" 'd'`, `\`, `"`, `a\ b`, `{model} --port {port}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := SplitWords(s)
		plain := true
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= 0x20 && c < 0x7f || c == '\t' || c == '\n') || c == '"' || c == '\'' || c == '\\' {
				plain = false
			}
		}
		// Without quotes or escapes, words are exactly the whitespace-separated fields.
		if plain && (err != nil || strings.Join(w, "\x00") != strings.Join(strings.Fields(s), "\x00")) {
			t.Fatalf("SplitWords(%q) = %q, %v", s, w, err)
		}
	})
}

func TestBindProcessToNode(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/node/node0/cpulist"); err != nil {
		t.Skip("no NUMA sysfs")
	}
	var before unix.CPUSet
	unix.SchedGetaffinity(0, &before)
	restore, cpus, err := BindProcessToNode(0)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := cpuSet(cpus)
	tids, _ := threads()
	for _, tid := range tids {
		var got unix.CPUSet
		if unix.SchedGetaffinity(tid, &got) == nil && got != want {
			t.Errorf("thread %d not bound to node 0 (%s)", tid, cpus)
		}
	}
	restore()
	var after unix.CPUSet
	unix.SchedGetaffinity(0, &after)
	if after != before {
		t.Errorf("affinity not restored")
	}
	if _, _, err := BindProcessToNode(9999); err == nil {
		t.Error("a node that does not exist must be an error")
	}
}

func TestCPUSet(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		fail bool
	}{{"0-3,8,10-11", 7, false}, {"5", 1, false}, {"", 0, true}, {"3-1", 0, true}, {"a", 0, true}, {"0-2000", 0, true}} {
		s, err := cpuSet(tt.in)
		if (err != nil) != tt.fail || (!tt.fail && s.Count() != tt.n) {
			t.Errorf("cpuSet(%q) = %d, %v", tt.in, s.Count(), err)
		}
	}
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// kill -9 of gpuvet runs no cleanup and Pdeathsig reaches only the engine itself: the watchdog
// must take the launcher shell's background jobs and the server's own child with it.
func TestKill9LeavesNoEngineProcess(t *testing.T) {
	dir := t.TempDir()
	ready, pids := filepath.Join(dir, "ready"), filepath.Join(dir, "pids")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GPUVET_ENGINE_TEST_ROLE=parent", "GPUVET_ENGINE_TEST_MODE=wait", "GPUVET_ENGINE_TEST_SHELL=1",
		"GPUVET_ENGINE_TEST_READY="+ready, "GPUVET_ENGINE_TEST_PIDS="+pids, "GPUVET_ENGINE_TEST_LOG="+filepath.Join(dir, "engine.log"))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pgid int
	for deadline := time.Now().Add(30 * time.Second); pgid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			pgid, _ = strconv.Atoi(string(b))
		}
	}
	if pgid == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("engine never became ready: %s", out)
	}
	defer syscall.Kill(-pgid, syscall.SIGKILL)
	// The shell's two sleeps, the server (exec'd in place of the shell) and its sleeper.
	if n := len(groupMembers(pgid)); n < 4 {
		t.Fatalf("engine group %d has %d processes, want ≥ 4 (shell jobs, server, its child)", pgid, n)
	}
	if _, err := os.Stat(filepath.Join(dir, "engine.pid")); err != nil {
		t.Errorf("no pid file beside the log: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	var left []int
	for i := 0; i < 250; i++ {
		if left = groupMembers(pgid); len(left) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("after kill -9 of gpuvet, engine processes %v survive", left)
}

// What a run killed beyond the watchdog's reach left is found by its pid file and ended; a process
// group without the engine's marker (a recycled id) is left alone.
func TestReapLeftovers(t *testing.T) {
	dir := t.TempDir()
	start := func(marker string) *exec.Cmd {
		c := exec.Command("sh", "-c", "sleep 1000 & sleep 1000")
		c.Env = append(os.Environ(), markerEnv+"="+marker)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL); c.Wait() })
		return c
	}
	left, other := start("aaaa"), start("bbbb")
	os.MkdirAll(filepath.Join(dir, "logs", "m"), 0o755)
	writePidFile(filepath.Join(dir, "logs", "m", "gpu0.log"), pidFile{PGID: left.Process.Pid, ID: "aaaa", Command: "vllm serve m"})
	writePidFile(filepath.Join(dir, "logs", "m", "gpu1.log"), pidFile{PGID: other.Process.Pid, ID: "not-bbbb", Command: "x"})
	// Both sleeps of the group running: a member caught between its fork and its exec (its /proc
	// entry in flux) was once not counted as the engine's (CI, a busy machine).
	sleeping := func() bool {
		n := 0
		for _, pid := range groupMembers(left.Process.Pid) {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == "sleep" {
				n++
			}
		}
		return n >= 2
	}
	for deadline := time.Now().Add(5 * time.Second); !sleeping() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	got, err := ReapLeftovers(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Command != "vllm serve m" || len(got[0].PIDs) < 2 {
		t.Fatalf("leftovers %+v, want the one engine with its shell's jobs", got)
	}
	for i := 0; i < 100 && len(groupMembers(left.Process.Pid)) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if n := groupMembers(left.Process.Pid); len(n) > 0 {
		t.Errorf("leftover processes %v still alive", n)
	}
	if len(groupMembers(other.Process.Pid)) == 0 {
		t.Errorf("a process group without the marker was killed")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "logs", "m", "*.pid")); len(m) != 0 {
		t.Errorf("pid files left: %v", m)
	}
}

// A real completion generated tokens; an error response or an empty one is refused with the body.
func TestParseReply(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
		tokens int
		err    string
	}{
		{200, `{"choices":[{"message":{"content":"OK"}}],"usage":{"completion_tokens":2}}`, 2, ""},
		{200, `{"choices":[{"message":{"content":"OK"}}]}`, 1, ""},
		{200, `{"choices":[{"message":{"content":null,"reasoning_content":"hmm"}}],"usage":{"completion_tokens":4}}`, 4, ""},
		{200, `{"choices":[{"message":{"content":""}}],"usage":{"completion_tokens":0}}`, 0, "generated no tokens"},
		{200, `{"choices":[]}`, 0, "not an OpenAI chat completion"},
		{500, `{"object":"error","message":"simulated engine error","type":"InternalServerError","code":500}`, 0, "HTTP 500: {\"object\":\"error\",\"message\":\"simulated engine error\""},
		{404, `{"message":"The model x does not exist."}`, 0, "HTTP 404"},
	} {
		r, err := parseReply(tt.status, []byte(tt.body))
		if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) || (err == nil && r.Tokens != tt.tokens) {
			t.Errorf("%d %s: %+v, %v; want %d tokens, error %q", tt.status, tt.body, r, err, tt.tokens, tt.err)
		}
	}
}

// TestExpandValuesAreNotTemplates: a value is put in as it is, never read as a template: a local
// model folder whose name holds braces is no unknown placeholder, and a value that looks like
// another placeholder is not substituted again (whatever order the table is walked in).
func TestExpandValuesAreNotTemplates(t *testing.T) {
	for range 20 {
		for _, model := range []string{"/models/{version}/llama", "/models/{port}"} {
			got, err := Expand("srv {model} --port {port}", Vars{Model: model, Port: 8001})
			if err != nil || strings.Join(got, "|") != "srv|"+model+"|--port|8001" {
				t.Fatalf("Expand with model %q = %q, %v", model, got, err)
			}
		}
	}
}

// TestSplitWordsDoubleQuoteEscapes: inside "…" a backslash escapes $ ` " \ as in a POSIX shell, and
// stays a backslash before anything else.
func TestSplitWordsDoubleQuoteEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`srv --x "{\"t\": 0}"`:       `srv|--x|{"t": 0}`,
		`srv "a\\" b`:                `srv|a\|b`,
		`srv "a\b"`:                  `srv|a\b`,
		`srv "\$HOME"`:               `srv|$HOME`,
		`srv 'a\' b`:                 `srv|a\|b`,
		"srv {model} \\\n  --port 1": `srv|{model}|--port|1`, // a YAML block's line continuation
		"srv \"a\\\nb\"":             `srv|ab`,
	} {
		got, err := SplitWords(in)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("SplitWords(%q) = %q, %v; want %q", in, strings.Join(got, "|"), err, want)
		}
	}
}

// TestReapLeftoversWholeGroup: once a member of the recorded group carries the engine's marker
// (so the group is the engine's, not a recycled id), the whole group goes, as the watchdog does:
// a worker the engine started with an environment of its own (env -i, a launcher's clean env) too.
func TestReapLeftoversWholeGroup(t *testing.T) {
	dir := t.TempDir()
	c := exec.Command("sh", "-c", "env -i sleep 1000 & sleep 1000")
	c.Env = append(os.Environ(), markerEnv+"=cccc")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL); c.Wait() })
	for deadline := time.Now().Add(5 * time.Second); len(groupMembers(c.Process.Pid)) < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // env has exec'd sleep
	writePidFile(filepath.Join(dir, "gpu0.log"), pidFile{PGID: c.Process.Pid, ID: "cccc", Command: "vllm serve m"})
	if _, err := ReapLeftovers(dir); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && len(groupMembers(c.Process.Pid)) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if n := groupMembers(c.Process.Pid); len(n) > 0 {
		t.Fatalf("processes %v of the engine's group still alive", n)
	}
}

// TestVersionDoesNotWaitForBackgroundChildren: a version command whose child outlives it holding
// stdout (a shell's background job, a daemon an import starts) neither hangs the version read
// until that child ends nor leaves it running.
func TestVersionDoesNotWaitForBackgroundChildren(t *testing.T) {
	start := time.Now()
	v, err := Version(context.Background(), "generic", `sh -c "sleep 30 & echo 1.2.3"`)
	if err != nil || v != "1.2.3" {
		t.Fatalf("Version = %q, %v; want 1.2.3", v, err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("Version took %s: it waited for the background child", d)
	}
}

// TestExitSeenThoughAChildHoldsTheLog: an engine whose process exited is seen to have exited
// (WaitReady fails at once with "engine exited before serving") even when a process it started in
// a session of its own (a daemon) still holds its output pipe.
func TestExitSeenThoughAChildHoldsTheLog(t *testing.T) {
	dir := t.TempDir()
	e, err := Start(Spec{Kind: "generic", Command: `sh -c "setsid sleep 25 & echo {port}; exit 3"`, Vars: Vars{Model: "m", Port: 18600},
		LogPath: filepath.Join(dir, "e.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop(time.Second)
	start := time.Now()
	_, err = e.WaitReady(context.Background(), "m", 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited before serving") || time.Since(start) > 15*time.Second {
		t.Fatalf("after %s: %v; want the exit seen within seconds", time.Since(start).Round(time.Second), err)
	}
}
