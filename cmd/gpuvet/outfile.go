package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuvet/gpuvet/internal/results"
)

// checkOutFile makes sure a result file can be written before the work starts: it is not a
// folder, and its nearest existing ancestor (where MkdirAll would start) is writable.
func checkOutFile(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory; give a file name", path)
	}
	f, err := os.CreateTemp(existingAncestor(filepath.Dir(path)), ".gpuvet-probe-*")
	if err != nil {
		return fmt.Errorf("%s cannot be written: %w", path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// checkReplaceable makes sure an output file gpuvet replaces (temp file and rename) is absent or a
// regular file that is not one of the command's inputs: not a symlink (never followed), nor a
// device, FIFO or socket (the rename would replace the node, and nothing reach its reader).
func checkReplaceable(path string, inputs ...string) error {
	st, err := os.Lstat(path)
	switch {
	case os.IsNotExist(err):
		return checkOutFile(path)
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	case st.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: gpuvet replaces only regular files; give the file's own path", path)
	case st.IsDir():
		return fmt.Errorf("%s is a directory; give a file name", path)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is %s, not a regular file: gpuvet writes a report by replacing the file; give a file path", path, fileKind(st.Mode()))
	}
	for _, in := range inputs {
		if ist, err := os.Stat(in); err == nil && os.SameFile(st, ist) {
			return fmt.Errorf("%s is this command's own input: writing it would replace it; give another path", path)
		}
	}
	return checkOutFile(path)
}

// fileKind names a file that is not a regular one, in words.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "a special file (" + m.Type().String() + ")"
}

// benchSteps is the number of rungs a bench profile runs: a sweep's sync, probe and rates, else one
// (a retried sweep's second attempt is shown on the last rung).
func benchSteps(c results.LoadConfig) int {
	if c.Profile != "sweep" {
		return 1
	}
	return 2 + c.Rates
}

// existingAncestor is dir or its nearest ancestor that exists: where the writer's MkdirAll starts.
func existingAncestor(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			return dir
		}
		dir = filepath.Dir(dir)
	}
}
