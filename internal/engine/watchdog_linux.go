package engine

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// The engine dies with gpuvet however gpuvet dies. Pdeathsig reaches only the engine's direct
// child, and a kill -9 of gpuvet runs no cleanup, so the workers an engine forks (vLLM, SGLang, a
// shell's background jobs) would keep running and keep GPU memory. Each engine therefore gets a
// watchdog: gpuvet re-executed in this mode, holding the read end of a pipe whose only write end
// gpuvet holds. When gpuvet closes it (Stop) or dies (the kernel closes it), the read returns
// EOF and the watchdog kills the engine's whole process group.

// watchdogEnv carries the process group the watchdog guards; set only in the watchdog's own
// environment, never in an engine's.
const watchdogEnv = "GPUVET_ENGINE_WATCHDOG"

// init turns any binary that links this package (gpuvet, and its test binaries) into the watchdog
// when started as one, before anything else runs.
func init() {
	if v := os.Getenv(watchdogEnv); v != "" {
		os.Exit(watchdog(v, os.NewFile(3, "gpuvet-lifeline")))
	}
}

// watchdog waits for EOF on the lifeline, then kills the process group PGID of arg ("PGID:ID")
// if a process in it still carries the engine's marker ID (a recycled group id is left alone).
func watchdog(arg string, lifeline io.Reader) int {
	g, id, _ := strings.Cut(arg, ":")
	pgid, err := strconv.Atoi(g)
	if err != nil || pgid <= 1 || id == "" {
		fmt.Fprintf(os.Stderr, "gpuvet watchdog: bad argument %q, want PGID:ID\n", arg)
		return 2
	}
	// Ctrl-C and hang-ups are gpuvet's to handle (it stops the engine and closes the lifeline);
	// a SIGTERM to the watchdog itself still takes the engine with it.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, lifeline)
		close(eof)
	}()
	select {
	case <-eof:
	case <-term:
	}
	if len(groupWithMarker(pgid, id)) > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // the whole group at once: no fork escapes between kills
	}
	return 0
}

// startWatchdog starts the watchdog of process group pgid, whose processes carry marker id, and
// returns the lifeline's write end: closing it (or gpuvet dying) kills the group.
func startWatchdog(pgid int, id string) (*os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("engine watchdog: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("engine watchdog: %w", err)
	}
	defer r.Close()
	c := exec.Command(exe)
	// A bare environment: the watchdog needs nothing, and so holds no secret.
	c.Env = []string{watchdogEnv + "=" + strconv.Itoa(pgid) + ":" + id}
	c.ExtraFiles = []*os.File{r}
	// Its own process group keeps it out of the terminal's Ctrl-C and out of the engine's group.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("engine watchdog: start %s: %w", exe, err)
	}
	go func() { _ = c.Wait() }() // reap it when it exits
	return w, nil
}
