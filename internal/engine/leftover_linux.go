package engine

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuvet/gpuvet/internal/filelimit"
)

// A pid file beside each engine log records the engine's process group while it runs, so that a
// later `gpuvet run` in the same output folder finds what a run killed beyond the watchdog's reach
// left (a kill of every gpuvet process at once, an OOM kill) and ends it. Every engine process
// carries markerEnv=ID in its environment: a recycled process-group id never matches.

const markerEnv = "GPUVET_ENGINE_ID"

// pidFile is what a pid file holds.
type pidFile struct {
	PGID    int    `json:"pgid"`
	ID      string `json:"id"` // the markerEnv value of every process of this engine
	Command string `json:"command"`
	Log     string `json:"log"`
}

func pidPath(logPath string) string { return strings.TrimSuffix(logPath, ".log") + ".pid" }

func newEngineID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func writePidFile(logPath string, p pidFile) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return os.WriteFile(pidPath(logPath), append(b, '\n'), 0o644)
}

// Leftover is an engine a previous run left running.
type Leftover struct {
	PidFile string
	Command string
	PIDs    []int
}

// ReapLeftovers finds the pid files under dir, kills the process group of each whose members still
// carry the engine's marker, removes the files, and returns what it killed so the caller can say so.
func ReapLeftovers(dir string) ([]Leftover, error) {
	var out []Leftover
	var errs []error
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".pid") {
			return nil
		}
		b, err := filelimit.Read(path, filelimit.Small, "engine pid file")
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		var p pidFile
		if json.Unmarshal(b, &p) != nil || p.PGID <= 1 || p.ID == "" {
			return nil // not ours
		}
		pids := groupWithMarker(p.PGID, p.ID)
		if len(pids) > 0 {
			// A live member carries the marker, so the group id is the engine's (a group's id is not
			// reused while a member lives): end the whole group at once, as the watchdog does, so a
			// process forked since the scan, or one that dropped its environment, goes with it.
			_ = syscall.Kill(-p.PGID, syscall.SIGKILL)
			out = append(out, Leftover{PidFile: path, Command: p.Command, PIDs: pids})
		}
		if err := os.Remove(path); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return out, errors.Join(append(errs, err)...)
}

// groupWithMarker lists the live processes in process group pgid whose environment carries
// markerEnv=id (processes of other users, whose environment cannot be read, never match).
func groupWithMarker(pgid int, id string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(markerEnv + "=" + id + "\x00")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
