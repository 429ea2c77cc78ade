package importer

import (
	"fmt"

	"github.com/gpuvet/gpuvet/internal/results"
)

// ReadBaseline reads a baseline in any format Read knows (gpuvet summary, vLLM bench, guidellm). A
// missing or corrupt baseline is not an error: it returns nil and the note to show ("no comparison:
// …"), so a run or a compare degrades instead of failing.
func ReadBaseline(path string) (*results.Summary, string) {
	s, _, err := Read(path)
	if err != nil {
		return nil, fmt.Sprintf("no comparison: baseline %s unreadable (%v)", path, err)
	}
	return s, ""
}

// ReadResult reads one environment's result in any supported format. Imported files (which record
// no environment of their own) are named by their path; gpuvet runs by their label, else their path.
func ReadResult(path string) (*results.Summary, error) {
	s, f, err := Read(path)
	if err != nil {
		return nil, err
	}
	// A run without its own label is named by its path (two runs are often both summary.json).
	if s.Environment == "" || f != FormatGPUVet {
		s.Environment = path
	}
	return s, nil
}
