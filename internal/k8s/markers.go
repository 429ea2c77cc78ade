package k8s

import "github.com/gpuvet/gpuvet/internal/inpod"

// The in-pod protocol (a Job's result in its log between markers; the probe's answer) is
// internal/inpod's, under these names here.
var (
	EmitResult    = inpod.EmitResult
	ExtractResult = inpod.ExtractResult
)

// CompletionCheck is one server's answer to `gpuvet probe`.
type CompletionCheck = inpod.CompletionCheck
