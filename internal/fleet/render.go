package fleet

import (
	"fmt"
	"io"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

// Render prints a fleet run's terminal output: the per-GPU table (with its HOST column), then one
// line per host, the skipped ones, and the fleet's caveats. A large fleet's is term's compact fleet
// block alone: it ranks every host and counts the rest, so no line per host follows.
func Render(w io.Writer, s *results.Summary) {
	term.Summary(w, s)
	term.History(w, s.History)
	if term.Compact(s) {
		return
	}
	fmt.Fprintln(w)
	for _, h := range s.Hosts {
		line := fmt.Sprintf("host %-20s %s", h.Name, h.Status)
		if h.Error != "" {
			line += ": " + h.Error
		}
		for _, v := range h.VMs {
			line += fmt.Sprintf(" [VM %d gpus %v provisioned in %.1fs, terminated %v]", v.ID, v.GPUs, v.ProvisionS, v.Terminated)
		}
		fmt.Fprintln(w, line)
		for _, f := range h.Flags {
			fmt.Fprintf(w, "  flag %s: %s\n", f.Check, f.Reason)
		}
	}
	if s.Fleet != nil {
		for _, sk := range s.Fleet.Skipped {
			fmt.Fprintf(w, "host %-20s skipped: %s\n", sk.Name, sk.Reason)
		}
	}
}
