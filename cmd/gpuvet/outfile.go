package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuvet/gpuvet/internal/results"
)

// checkOutFile makes sure a result file can be written before the work that produces it starts
// (bad input, exit 2): its folder exists and is writable, and it is not a folder itself.
func checkOutFile(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory; give a file name", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".gpuvet-probe-*")
	if err != nil {
		return fmt.Errorf("%s cannot be written: %v", path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// benchSteps is the number of rungs a bench profile runs: a sweep's sync, probe and rates, else one
// (a retried sweep's second attempt is shown on the last rung).
func benchSteps(c results.LoadConfig) int {
	if c.Profile != "sweep" {
		return 1
	}
	return 2 + c.Rates
}
