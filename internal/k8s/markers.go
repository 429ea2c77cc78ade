package k8s

import "github.com/gpuvet/gpuvet/internal/inpod"

// The in-pod protocol (a Job's result in its log between markers; the probe's answer) is
// internal/inpod's, which the command's in-pod subcommands speak too; the Kubernetes code that
// starts the Jobs and reads their logs uses it under these names.
var (
	EmitResult    = inpod.EmitResult
	ExtractResult = inpod.ExtractResult
)

// CompletionCheck is one server's answer to `gpuvet probe`.
type CompletionCheck = inpod.CompletionCheck
