package ssh

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuvet/gpuvet/internal/filelimit"
	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Job is one host's run: what to copy, what to run, where results go.
type Job struct {
	// Binary is the gpuvet executable copied to the host; BinaryArch its GOARCH (checked against the
	// host's `uname -m` before anything is copied).
	Binary     string
	BinaryArch string
	// Plan is the resolved plan as YAML, passed to the remote run as -c plan.yaml.
	Plan []byte
	// Args are appended to `gpuvet run -c plan.yaml --out out` there (e.g. --backend local).
	Args []string
	// RemoteDir is the folder gpuvet creates on the host and removes at the end (it must not exist).
	RemoteDir string
	// RunID is written into RemoteDir/.gpuvet-run when the folder is made: gpuvet removes only a
	// folder that carries its run's marker.
	RunID string
	// Env holds secrets the remote run needs (HF_TOKEN): sent on the session's stdin and exported
	// there, never in argv, a file or a log.
	Env map[string]string
	// LocalOut receives the host's output folder (summary.json, logs/, raw/, report).
	LocalOut string
	// Progress gets each line the remote run prints (stdout and stderr), without its newline.
	Progress func(line string)
	// StopGrace is how long an interrupted remote run gets to stop its engines after SIGTERM before
	// SIGKILL (default 20 s).
	StopGrace time.Duration
}

// Outcome is what came back from one host.
type Outcome struct {
	Summary  *results.Summary // nil when the run wrote none
	ExitCode int              // the remote gpuvet's exit status (-1: unknown, e.g. the connection died)
	Tail     string           // the last lines the remote run printed, for a failure's reason
}

// errNotCreated marks a Prepare failure before RemoteDir existed: nothing to remove.
var errNotCreated = errors.New("nothing created on the host")

// Prepare checks the host's architecture against the binary, creates RemoteDir (it must not
// exist) and copies gpuvet and the plan into it.
func Prepare(ctx context.Context, c *gossh.Client, j Job) error {
	arch, err := output(ctx, c, "uname -m")
	if err != nil {
		return fmt.Errorf("uname -m: %w (%w)", err, errNotCreated)
	}
	if got := goarch(strings.TrimSpace(arch)); got != j.BinaryArch {
		return fmt.Errorf("host is %s (%s) but the gpuvet binary is %s: build one with GOARCH=%s and pass it with ssh.binary (%w)", strings.TrimSpace(arch), got, j.BinaryArch, got, errNotCreated)
	}
	if err := checkRunDir(j.RemoteDir, j.RunID); err != nil {
		return fmt.Errorf("%w (%w)", err, errNotCreated)
	}
	// The folder and its marker in one command: a folder that existed already (mkdir fails) is
	// never gpuvet's to remove.
	mk := fmt.Sprintf("mkdir -m 700 %s && printf %%s %s > %s", quote(j.RemoteDir), quote(j.RunID), quote(j.RemoteDir+"/"+Marker))
	if _, err := output(ctx, c, mk); err != nil {
		return fmt.Errorf("mkdir %s: %w (%w)", j.RemoteDir, err, errNotCreated)
	}
	if err := upload(ctx, c, j.Binary, j.RemoteDir+"/gpuvet", 0o700); err != nil {
		return fmt.Errorf("copy gpuvet: %w", err)
	}
	if err := put(ctx, c, bytes.NewReader(j.Plan), j.RemoteDir+"/plan.yaml", 0o600); err != nil {
		return fmt.Errorf("copy plan: %w", err)
	}
	return nil
}

// Execute runs the prepared gpuvet and collects its output folder into LocalOut, also after a
// failure or an interrupt (a killed run keeps what it measured).
func Execute(ctx context.Context, c *gossh.Client, j Job) (*Outcome, error) {
	out := &Outcome{ExitCode: -1}
	code, tail, runErr := runRemote(ctx, c, j)
	out.ExitCode, out.Tail = code, tail
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	collectErr := collect(cctx, c, j.RemoteDir+"/out", j.LocalOut)
	if s, err := results.Read(filepath.Join(j.LocalOut, "summary.json")); err == nil {
		out.Summary = s
	}
	switch {
	case runErr != nil:
		return out, runErr
	case out.Summary == nil && collectErr != nil:
		return out, fmt.Errorf("remote gpuvet exited %d and its results could not be collected (%w); last output: %s", code, collectErr, tail)
	case out.Summary == nil:
		return out, fmt.Errorf("remote gpuvet exited %d without a summary; last output: %s", code, tail)
	case code > 1:
		// gpuvet exits 0 or 1 once it has judged; anything else (137: SIGKILL, the OOM killer) is
		// a run that died: what it measured is kept, but it never passes.
		return out, fmt.Errorf("remote gpuvet died (exit %d%s) before it finished; its partial results are kept; last output: %s", code, signalName(code), tail)
	case !out.Summary.Complete:
		return out, fmt.Errorf("remote gpuvet exited %d but its summary says complete: false (the run did not finish); its partial results are kept; last output: %s", code, tail)
	}
	return out, nil
}

// signalName names the signal of a shell-style exit status (128+N).
func signalName(code int) string {
	return map[int]string{137: ": SIGKILL, e.g. the OOM killer", 143: ": SIGTERM", 139: ": SIGSEGV", 134: ": SIGABRT"}[code]
}

// goarch maps `uname -m` to Go's GOARCH names.
func goarch(m string) string {
	if a, ok := map[string]string{"x86_64": "amd64", "aarch64": "arm64"}[m]; ok {
		return a
	}
	return m
}

var quote = fleet.ShellQuote

// output runs cmd in a new session and returns its stdout; the error carries stderr.
func output(ctx context.Context, c *gossh.Client, cmd string) (string, error) {
	return outputIn(ctx, c, nil, cmd)
}

// outputIn is output with stdin read from in (nil: none).
func outputIn(ctx context.Context, c *gossh.Client, in io.Reader, cmd string) (string, error) {
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	// A host's answer is outside input: bounded (a script prints lines of state, apt a few hundred
	// KiB), its error text cut to its last 2 KiB.
	stdout, stderr := &filelimit.Buffer{Limit: maxOutput}, &tailBuffer{n: 2048}
	s.Stdin, s.Stdout, s.Stderr = in, stdout, stderr
	err = waitCtx(ctx, s, cmd)
	if err == nil && stdout.Over {
		err = fmt.Errorf("the host's output is over %s: cut, not read", filelimit.Size(maxOutput))
	}
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return string(stdout.Bytes()), fmt.Errorf("%w: %s", err, msg)
		}
		return string(stdout.Bytes()), err
	}
	return string(stdout.Bytes()), nil
}

// maxOutput bounds what one script's stdout may hold.
const maxOutput = 16 << 20

// tailBuffer keeps the last n bytes written to it (a failing command's last words: apt's "E: …"
// comes after everything else it printed).
type tailBuffer struct {
	n   int
	b   []byte
	cut bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.n {
		t.b, t.cut = append(t.b[:0], t.b[len(t.b)-t.n:]...), true
	}
	return len(p), nil
}

// String is what was kept, "…" first when the start was cut.
func (t *tailBuffer) String() string {
	b := t.b
	if len(b) > t.n {
		b, t.cut = b[len(b)-t.n:], true
	}
	if t.cut {
		return "…" + string(b)
	}
	return string(b)
}

// waitCtx runs cmd and returns when it ends or ctx is done (then the session is closed).
func waitCtx(ctx context.Context, s *gossh.Session, cmd string) error {
	if err := s.Start(cmd); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}

func upload(ctx context.Context, c *gossh.Client, local, remote string, mode os.FileMode) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	return put(ctx, c, f, remote, mode)
}

// put streams r into the remote file through `cat` (no scp or sftp needed on the host).
func put(ctx context.Context, c *gossh.Client, r io.Reader, remote string, mode os.FileMode) error {
	_, err := outputIn(ctx, c, r, fmt.Sprintf("cat > %s && chmod %o %s", quote(remote), mode, quote(remote)))
	return err
}

// runRemote runs gpuvet there, streaming its lines to Progress. On ctx cancel the remote run gets
// SIGTERM (it stops its engines and writes what it measured), then SIGKILL after StopGrace.
func runRemote(ctx context.Context, c *gossh.Client, j Job) (int, string, error) {
	s, err := c.NewSession()
	if err != nil {
		return -1, "", err
	}
	defer s.Close()
	dir := quote(j.RemoteDir)
	// The controller records the fleet's history (fleet.Execute): a host's own run keeps none, so
	// nothing of it stays on the host.
	args := []string{"./gpuvet", "run", "-c", "plan.yaml", "--out", "out", "--set", "history.enabled=false"}
	for _, a := range j.Args {
		args = append(args, quote(a))
	}
	// The pid file lets a second session signal the run (not every sshd delivers signals). Secrets
	// come on stdin, NAME=value lines up to an empty one, exported by the shell: never in argv, a
	// file or the command sshd logs.
	secrets, err := envLines(j.Env)
	if err != nil {
		return -1, "", err
	}
	s.Stdin = strings.NewReader(secrets)
	cmd := fmt.Sprintf(`cd %s && echo $$ > pid && while IFS= read -r l && [ -n "$l" ]; do export "$l"; done && exec %s`, dir, strings.Join(args, " "))
	tail := &tailLines{max: 20}
	var wg sync.WaitGroup
	stream := func(r io.Reader) {
		// A line longer than maxLine (binary garbage, a log with no newline) comes in pieces: a
		// scanner that stopped at it would leave the stream unread and the host blocked on its write.
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, maxLine), maxLine)
		sc.Split(cutLines)
		for sc.Scan() {
			tail.add(sc.Text())
			if j.Progress != nil {
				j.Progress(sc.Text())
			}
		}
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		return -1, "", err
	}
	stderr, err := s.StderrPipe()
	if err != nil {
		return -1, "", err
	}
	wg.Go(func() { stream(stdout) })
	wg.Go(func() { stream(stderr) })
	if err := s.Start(cmd); err != nil {
		return -1, "", err
	}
	done := make(chan error, 1)
	go func() { wg.Wait(); done <- s.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		werr = stop(c, s, j, done)
	}
	code := exitCode(werr)
	if ctx.Err() != nil {
		return code, tail.String(), fmt.Errorf("interrupted: the remote run was stopped (%w)", ctx.Err())
	}
	if code < 0 {
		return code, tail.String(), fmt.Errorf("the connection to the host died mid-run (%w); last output: %s", werr, tail.String())
	}
	return code, tail.String(), nil
}

// maxLine is the longest progress line kept whole; a longer one is cut into lines of this size.
const maxLine = 64 << 10

// cutLines is bufio.ScanLines that cuts a line at maxLine bytes instead of failing on it.
func cutLines(data []byte, atEOF bool) (int, []byte, error) {
	adv, tok, err := bufio.ScanLines(data, atEOF)
	if adv == 0 && tok == nil && err == nil && len(data) >= maxLine {
		return maxLine, data[:maxLine], nil
	}
	return adv, tok, err
}

// stop asks the remote run to end (SIGTERM through the session and through kill), waits StopGrace,
// then kills it.
func stop(c *gossh.Client, s *gossh.Session, j Job, done <-chan error) error {
	grace := fleet.OrDefault(j.StopGrace, 20*time.Second)
	bg, cancel := context.WithTimeout(context.Background(), grace+30*time.Second)
	defer cancel()
	pid := "$(cat " + quote(j.RemoteDir+"/pid") + ")"
	_ = s.Signal(gossh.SIGTERM)
	_, _ = output(bg, c, "kill -TERM "+pid+" 2>/dev/null")
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
	}
	_, _ = output(bg, c, "kill -KILL "+pid+" 2>/dev/null")
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		return errors.New("the remote run did not end after SIGKILL")
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envLines is the stdin header that carries j.Env: NAME=value lines, then an empty line.
func envLines(env map[string]string) (string, error) {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		if !envName.MatchString(k) || strings.ContainsAny(v, "\n\r\x00") {
			return "", fmt.Errorf("secret $%s cannot be passed to the host (a name of letters, digits and _, a value of one line)", k)
		}
		b.WriteString(k + "=" + v + "\n")
	}
	return b.String() + "\n", nil
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *gossh.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus()
	}
	return -1
}

// collect copies the remote folder into local through tar (present on every Linux host).
func collect(ctx context.Context, c *gossh.Client, remote, local string) error {
	s, err := c.NewSession()
	if err != nil {
		return err
	}
	defer s.Close()
	r, err := s.StdoutPipe()
	if err != nil {
		return err
	}
	stderr := &tailBuffer{n: 2048}
	s.Stderr = stderr
	if err := s.Start("tar -C " + quote(remote) + " -cf - ."); err != nil {
		return err
	}
	// Bounded by ctx: a host that stops sending mid-tar has its session closed.
	defer context.AfterFunc(ctx, func() { s.Close() })()
	xerr := untar(r, local, untarBudget(local))
	_, _ = io.Copy(io.Discard, r)
	werr := s.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("tar: %w (the host's results were not all collected)", ctx.Err())
	}
	if err := werr; err != nil {
		return fmt.Errorf("tar: %w %s", err, strings.TrimSpace(stderr.String()))
	}
	return xerr
}

// keepFree is what a host's results must leave free on the disk they land on: room for the other
// hosts' results and the run's own files.
const keepFree = 1 << 30

// maxUntarEntries bounds the files and folders of one host's results (a host's results folder
// holds tens): a stream of empty entries would otherwise take the disk's inodes.
var maxUntarEntries = 100_000

// untarBudget is how many bytes a host's results may add under dir: the free space there less
// keepFree; no bound when the file system cannot tell.
func untarBudget(dir string) int64 {
	free, ok := filelimit.FreeBytes(dir)
	if !ok {
		return math.MaxInt64 - 1 // untar reads one byte past its budget to see it crossed
	}
	return max(free-keepFree, 0)
}

// untar extracts regular files and folders under dir, refusing any path that leaves it, and stops
// (removing the file it was writing) past budget bytes or maxUntarEntries entries.
func untar(r io.Reader, dir string, budget int64) error {
	tr := tar.NewReader(r)
	for entries := 1; ; entries++ {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if entries > maxUntarEntries {
			return fmt.Errorf("the host sent more than %d files and folders: not gpuvet's results", maxUntarEntries)
		}
		name := filepath.Clean(h.Name)
		if name == "." {
			continue
		}
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("tar entry %q leaves the output folder", h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
			if err != nil {
				return err
			}
			n, err := io.Copy(f, io.LimitReader(tr, budget+1))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if budget -= n; budget < 0 {
				os.Remove(p)
				return fmt.Errorf("the host's results are more than the disk under %s can spare (it keeps %s free): free space there, or set output.dir on a larger disk", dir, filelimit.Size(keepFree))
			}
			if err != nil {
				return err
			}
		}
	}
}

// Marker is the file in a run folder that says which run made it (its content: the run id).
const Marker = ".gpuvet-run"

// checkRunDir refuses a folder that is not one gpuvet names for a run: absolute, clean, and named
// gpuvet-RUNID-… (a manifest can be edited: its paths are not trusted).
func checkRunDir(dir, runID string) error {
	if runID == "" || !path.IsAbs(dir) || path.Clean(dir) != dir || !strings.HasPrefix(path.Base(dir), "gpuvet-"+runID) {
		return fmt.Errorf("refusing %q: not a gpuvet run folder of run %q (want /DIR/gpuvet-%s-HOST)", dir, runID, runID)
	}
	return nil
}

// guard is the preamble of every script that touches a run folder: one that is gone is done (exit
// 0), one without the run's marker is refused (exit 3).
const guard = `d=%s; id=%s
[ -e "$d" ] || [ -L "$d" ] || exit 0
if [ -L "$d" ] || [ ! -d "$d" ] || [ "$(cat "$d/.gpuvet-run" 2>/dev/null)" != "$id" ]; then
  echo "$d does not carry the marker of gpuvet run $id ($d/.gpuvet-run): not gpuvet's, left alone" >&2; exit 3
fi
`

// stopScript stops a run still going in the folder (its controller was killed): SIGTERM lets it
// stop its engines and write what it measured; the pid counts only while it runs in this folder.
const stopScript = `if [ -f "$d/pid" ]; then
  p=$(cat "$d/pid")
  if [ "$(readlink /proc/$p/cwd 2>/dev/null)" = "$d" ] && kill -TERM "$p" 2>/dev/null; then
    i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 60 ]; do sleep 0.5; i=$((i+1)); done
    kill -KILL "$p" 2>/dev/null
  fi
fi
:
`

func runDirScript(ctx context.Context, c *gossh.Client, dir, runID, body string) error {
	if err := checkRunDir(dir, runID); err != nil {
		return err
	}
	_, err := output(ctx, c, fmt.Sprintf(guard, quote(dir), quote(runID))+body)
	return err
}

// Stop stops a run still going in the run folder (safe when there is none).
func Stop(ctx context.Context, c *gossh.Client, dir, runID string) error {
	if err := runDirScript(ctx, c, dir, runID, stopScript); err != nil {
		return fmt.Errorf("stop the run in %s: %w", dir, err)
	}
	return nil
}

// Remove deletes run runID's folder dir on the host (stopping a run still going there first) and
// checks it is gone; safe to run twice. A folder without the run's marker is never touched.
func Remove(ctx context.Context, c *gossh.Client, dir, runID string) error {
	if err := runDirScript(ctx, c, dir, runID, stopScript+`rm -rf "$d"; test ! -e "$d"`); err != nil {
		return fmt.Errorf("%s left on the host: %w", dir, err)
	}
	return nil
}

// tailLines keeps the last max lines.
type tailLines struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *tailLines) add(l string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, l)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *tailLines) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return "(nothing)"
	}
	last := t.lines[max(0, len(t.lines)-3):]
	return strings.Join(last, " | ")
}
