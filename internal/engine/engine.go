package engine

import (
	"cmp"
	"github.com/gpuvet/gpuvet/internal/enginekind"
	"github.com/gpuvet/gpuvet/internal/results"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec is one engine to launch.
type Spec struct {
	Kind      string   // vllm, sglang, trtllm, generic
	Command   string   // template; empty: the built-in one of Kind
	ExtraArgs []string // appended after expansion
	Vars      Vars     // Port is the first port tried; the engine gets the first free one from there
	// NUMANode of the GPU (-1 unknown); with NUMABind the engine runs under numactl bound to it.
	NUMANode int
	NUMABind bool
	// Env is extra environment (model cache: HF_HOME, HF_HUB_OFFLINE=1; non-secret settings).
	// Secrets are not passed here: the engine inherits them from gpuvet's own environment.
	Env     map[string]string
	LogPath string // stdout+stderr, redacted
	// TokenEnv names the variable holding the hub token: its value is redacted wherever it appears
	// and handed to the engine as HF_TOKEN (through the environment, never argv).
	TokenEnv string
	// Environ is the base environment (os.Environ() when nil).
	Environ []string
}

// Engine is one running engine.
type Engine struct {
	URL       string
	Port      int
	Command   string // as launched, secrets redacted
	Binding   string // the numactl prefix, or why there is none
	LogPath   string
	StartedAt time.Time

	cmd      *exec.Cmd
	log      *os.File
	rw       *RedactWriter
	red      *Redactor
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
	lifeline *os.File // write end of the watchdog's pipe: closing it kills the process group
}

// Start launches the engine in its own process group with CUDA_VISIBLE_DEVICES set to its GPUs.
func Start(s Spec) (*Engine, error) {
	tmpl := cmp.Or(s.Command, enginekind.Get(s.Kind).Template)
	if tmpl == "" {
		return nil, fmt.Errorf("engine kind %q has no built-in template: set engine.command", s.Kind)
	}
	port, err := FreePort(s.Vars.Port)
	if err != nil {
		return nil, err
	}
	s.Vars.Port = port
	if s.Vars.Front, err = writeFront(tmpl, dirOf(s.LogPath)); err != nil {
		return nil, err
	}
	argv, err := Expand(tmpl, s.Vars)
	if err != nil {
		return nil, err
	}
	argv = append(argv, s.ExtraArgs...)
	binding := "none: NUMA binding disabled (engine.numa_bind=false)"
	if s.NUMABind {
		switch np, err := exec.LookPath("numactl"); {
		case s.NUMANode < 0:
			binding = "none: the GPU's NUMA node is unknown"
		case err != nil:
			binding = "none: numactl is not installed"
		default:
			n := strconv.Itoa(s.NUMANode)
			binding = "numactl --cpunodebind=" + n + " --membind=" + n
			argv = append([]string{np, "--cpunodebind=" + n, "--membind=" + n}, argv...)
		}
	}
	environ := s.Environ
	if environ == nil {
		environ = os.Environ()
	}
	red := NewRedactor(environ)
	env := append([]string{}, environ...)
	if s.TokenEnv != "" {
		if tok := lookup(environ, s.TokenEnv); tok != "" {
			red.Add(tok)
			if s.TokenEnv != "HF_TOKEN" {
				env = append(env, "HF_TOKEN="+tok)
			}
		}
	}
	gpus := s.Vars.gpuList()
	env = append(env, "CUDA_VISIBLE_DEVICES="+gpus)
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	id := newEngineID()
	env = append(env, markerEnv+"="+id)
	if err := os.MkdirAll(dirOf(s.LogPath), 0o755); err != nil {
		return nil, err
	}
	lf, err := os.Create(s.LogPath)
	if err != nil {
		return nil, fmt.Errorf("engine log: %w", err)
	}
	e := &Engine{
		Port: port, URL: "http://127.0.0.1:" + strconv.Itoa(port), Binding: binding, LogPath: s.LogPath,
		Command: red.String(strings.Join(quoteAll(argv), " ")), log: lf, red: red, done: make(chan struct{}),
	}
	e.rw = red.Writer(lf)
	fmt.Fprintf(e.rw, "# gpuvet: %s\n# CUDA_VISIBLE_DEVICES=%s binding: %s\n", e.Command, gpus, binding)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = e.rw, e.rw
	cmd.SysProcAttr = procAttr()
	// Once the engine has exited, a process it put in a session of its own (a daemon) that still
	// holds its output must not keep it "running": its exit is seen within WaitDelay.
	cmd.WaitDelay = 5 * time.Second
	e.StartedAt = time.Now()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w (is it installed and on PATH?)", argv[0], err)
	}
	e.cmd = cmd
	if e.lifeline, err = startWatchdog(cmd.Process.Pid, id); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		lf.Close()
		return nil, err
	}
	if err := writePidFile(s.LogPath, pidFile{PGID: cmd.Process.Pid, ID: id, Command: e.Command, Log: s.LogPath}); err != nil {
		fmt.Fprintf(e.rw, "# gpuvet: no pid file (%v): a run killed beyond the watchdog's reach cannot be cleaned up by the next one\n", err)
	}
	track(e)
	go func() {
		e.waitErr = cmd.Wait()
		close(e.done)
	}()
	return e, nil
}

func lookup(environ []string, name string) string {
	v := ""
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val // the last one wins, as in exec
		}
	}
	return v
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "."
}

func quoteAll(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\"'\\") {
			out[i] = strconv.Quote(a)
		} else {
			out[i] = a
		}
	}
	return out
}

// FreePort returns the first port from start on that nobody listens on (at most 200 tried), so
// readiness can never be answered by another server: where Start puts an engine, and what the
// preflight checks.
func FreePort(start int) (int, error) {
	for p := start; p < start+200 && p < 65536; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port in %d..%d: set engine.port_base elsewhere", start, start+199)
}

// PID is the engine's process id (= its process group id).
func (e *Engine) PID() int { return e.cmd.Process.Pid }

// Exited reports whether the engine process has exited.
func (e *Engine) Exited() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// ExitStatus says how the engine process ended ("exit status 1", "signal: killed"); "" while it runs.
func (e *Engine) ExitStatus() string {
	if !e.Exited() {
		return ""
	}
	if e.waitErr != nil {
		return e.waitErr.Error()
	}
	return "exit status 0"
}

// WaitReady polls with a real chat completion until one comes back, the engine exits, ctx ends,
// or timeout passes. It returns the provisioning time (start -> first real completion).
func (e *Engine) WaitReady(ctx context.Context, model string, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if e.Exited() {
			return 0, fmt.Errorf("engine exited before serving (%s); see the log tail", e.ExitStatus()) // "exit status 0", not "<nil>"
		}
		err := Probe(ctx, e.URL, model, "")
		if err == nil {
			return time.Since(e.StartedAt), nil
		}
		last = err
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return 0, fmt.Errorf("engine not serving after %s (last: %v); raise engine.ready_timeout if the model is large", timeout, last)
			}
			return 0, ctx.Err()
		case <-e.done:
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Probe sends one real chat completion and insists on an OpenAI chat completion coming back.
func Probe(ctx context.Context, url, model, apiKey string) error {
	return Complete(ctx, url, model, apiKey, "Reply with OK.", 4, 30*time.Second)
}

// Complete sends one chat completion (readiness probe, warm-up) bounded by timeout, and fails unless
// HTTP 200 brings a chat completion with at least one choice that generated tokens.
func Complete(ctx context.Context, url, model, apiKey, prompt string, maxTokens int, timeout time.Duration) error {
	_, err := Completion(ctx, url, model, apiKey, prompt, maxTokens, timeout)
	return err
}

// Reply is what one real completion brought back.
type Reply struct {
	// Tokens generated: usage.completion_tokens, or 1 for a non-empty text when the server sends no usage.
	Tokens int
	Text   string // the message's content (its reasoning_content when the content is empty)
}

// Completion sends one chat completion bounded by timeout and returns what it generated. It fails
// unless HTTP 200 brings a chat completion with a choice and at least one generated token; the
// error quotes the server's response.
func Completion(ctx context.Context, url, model, apiKey, prompt string, maxTokens int, timeout time.Duration) (Reply, error) {
	body, _ := json.Marshal(map[string]any{
		"model":      model,
		"messages":   []map[string]string{{"role": "user", "content": prompt}},
		"max_tokens": maxTokens,
	})
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, results.JoinURL(url, "/v1/chat/completions"), bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return parseReply(resp.StatusCode, b)
}

// parseReply reads a chat completion response.
func parseReply(status int, b []byte) (Reply, error) {
	if status != http.StatusOK {
		return Reply{}, fmt.Errorf("HTTP %d: %.200s", status, b)
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				Reasoning string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) == 0 {
		return Reply{}, fmt.Errorf("not an OpenAI chat completion: %.200s", b)
	}
	rep := Reply{Text: cmp.Or(r.Choices[0].Message.Content, r.Choices[0].Message.Reasoning)}
	switch {
	case r.Usage != nil && r.Usage.CompletionTokens > 0:
		rep.Tokens = r.Usage.CompletionTokens
	case rep.Text != "":
		rep.Tokens = 1
	default:
		return rep, fmt.Errorf("a chat completion that generated no tokens: %.200s", b)
	}
	return rep, nil
}

// Stop ends the engine's whole process group: SIGTERM, then SIGKILL after grace. Safe to call more
// than once and from several goroutines.
func (e *Engine) Stop(grace time.Duration) error {
	var err error
	e.stopOnce.Do(func() {
		defer untrack(e)
		pgid := e.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(grace):
		}
		// The leader may be gone while children it forked still run: kill the group regardless.
		if kerr := syscall.Kill(-pgid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			err = fmt.Errorf("kill process group %d: %w", pgid, kerr)
		}
		<-e.done
		e.lifeline.Close() // the group is gone: the watchdog finds nothing left to kill and exits
		_ = os.Remove(pidPath(e.LogPath))
		e.rw.Close()
		e.log.Close()
	})
	return err
}

// LogTail returns the last n lines of the engine log (already redacted on write; redacted again).
func (e *Engine) LogTail(n int) string {
	e.rw.Close()
	return Tail(e.LogPath, n, e.red)
}

// Tail returns the last n lines of a file, redacted.
func Tail(path string, n int, red *Redactor) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	// Only the end is read: an engine log can run to gigabytes.
	if st, err := f.Stat(); err == nil && st.Size() > 64<<10 {
		f.Seek(st.Size()-64<<10, io.SeekStart)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.Join(lines, "\n")
	if red != nil {
		s = red.String(s)
	}
	return s
}

// Version runs a version command (default: the kind's) and returns its last non-empty output line.
func Version(ctx context.Context, kind, command string) (string, error) {
	command = cmp.Or(command, enginekind.Get(kind).VersionCommand)
	if command == "" {
		return "", fmt.Errorf("no version command for engine kind %q: set engine.version_command", kind)
	}
	argv, err := SplitWords(command)
	if err != nil || len(argv) == 0 {
		return "", fmt.Errorf("engine.version_command: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = procAttr()
	// The command runs in a group of its own: the timeout ends the group, and a child that outlives
	// the command holding its stdout (a background job) is not waited for past WaitDelay.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 3 * time.Second
	out, err := cmd.Output()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what it left behind
	}
	if errors.Is(err, exec.ErrWaitDelay) && len(bytes.TrimSpace(out)) > 0 {
		err = nil // it exited 0 and printed its version; only a child kept stdout open
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", command, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// live tracks running engines so StopAll can end every one (signal handlers, panics).
var live = struct {
	sync.Mutex
	m map[*Engine]struct{}
}{m: map[*Engine]struct{}{}}

func track(e *Engine) {
	live.Lock()
	live.m[e] = struct{}{}
	live.Unlock()
}

func untrack(e *Engine) {
	live.Lock()
	delete(live.m, e)
	live.Unlock()
}

// StopAll stops every engine still running; callers defer it at the top of a run.
func StopAll(grace time.Duration) {
	live.Lock()
	es := slices.Collect(maps.Keys(live.m))
	live.Unlock()
	var wg sync.WaitGroup
	for _, e := range es {
		wg.Add(1)
		go func() { defer wg.Done(); e.Stop(grace) }()
	}
	wg.Wait()
}
