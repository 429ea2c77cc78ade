package main

import (
	"fmt"
	"io"

	"github.com/gpuvet/gpuvet/internal/engine"
)

// reapLeftovers ends, and says so, the engines a killed earlier run in the same output folder left
// running (their pid files are beside the engine logs), before this run needs their GPUs and ports.
func reapLeftovers(outDir string, w io.Writer) {
	left, err := engine.ReapLeftovers(outDir)
	for _, l := range left {
		fmt.Fprintf(w, "gpuvet: an earlier run in %s was killed and left engine processes %v running (%s, from %s): killed them\n",
			outDir, l.PIDs, l.Command, l.PidFile)
	}
	if err != nil {
		fmt.Fprintf(w, "gpuvet: checking %s for engines an earlier run left: %v\n", outDir, err)
	}
}
