package pipeline

import (
	"github.com/gpuvet/gpuvet/internal/judge"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// NewSummary begins a run's summary with its identity and the plan's meta: the one place a summary
// is begun (the host pipeline and the fleet layer both call it).
func NewSummary(plan *config.Plan, runID string, start time.Time, toolVersion string) *results.Summary {
	c := plan.Config
	lc := c.LoadConfig()
	return &results.Summary{
		SchemaVersion: results.SchemaVersion,
		Tool:          results.Tool{Name: "gpuvet", Version: toolVersion, Commit: vcsCommit()},
		RunID:         runID,
		StartedAt:     start,
		Backend:       c.Backend,
		Environment:   Environment(plan),
		Meta: results.Meta{Models: c.Models, LoadProfile: &lc, Thresholds: judge.FromPlan(plan, nil).Thresholds(),
			Settings: plan.Settings()},
	}
}

// Environment is the environment a run records: the plan's, or when left at its default, the
// backend's own (vm for opennebula, k8s for kubernetes).
func Environment(plan *config.Plan) string {
	src := plan.Source("environment")
	if src != "" && !strings.HasPrefix(src, "default") {
		return plan.Config.Environment
	}
	if env := backendkind.Of(plan.Config.Backend).Environment; env != "" {
		return env
	}
	return plan.Config.Environment
}

// vcsCommit is the commit the binary was built from ("" when the build did not record it).
func vcsCommit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}
