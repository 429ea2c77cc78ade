package pipeline

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/term"
)

// The run's progress: one term.Progress over every endpoint (units) and load rung (steps). The
// phases log through the run's writer, carried in the context, so their lines land above the live line.

type ctxKey int

const (
	logKey ctxKey = iota
	rungKey
	planKey
	blockKey
)

// logFrom is the run's log writer in ctx, else def.
func logFrom(ctx context.Context, def io.Writer) io.Writer {
	if w, ok := ctx.Value(logKey).(io.Writer); ok {
		return w
	}
	return def
}

// rungFrom is the callback of the endpoint being loaded in ctx (nil: none).
func rungFrom(ctx context.Context) func(int, string) {
	f, _ := ctx.Value(rungKey).(func(int, string))
	return f
}

// planFrom is the plan callback of the endpoint being loaded in ctx (nil: none; load.Options.OnPlan).
func planFrom(ctx context.Context) func(int, time.Duration) {
	f, _ := ctx.Value(planKey).(func(int, time.Duration))
	return f
}

// blockFrom is the wait before each synchronous block in ctx (nil: none; load.Options.BeforeBlock).
func blockFrom(ctx context.Context) func(context.Context, int) {
	s, _ := ctx.Value(blockKey).(*blockSync)
	if s == nil {
		return nil
	}
	return s.wait
}

// RungLine matches the load generator's own line for a rung start; the progress says it instead.
var RungLine = regexp.MustCompile(`^gpuvet bench: rung \d+: `).MatchString

// stepsPerEndpoint is how many load rungs one endpoint runs: a sweep's sync blocks, probe and
// rates, or one run, plus the aicr concurrency run when aicr gates are set.
func (r *run) stepsPerEndpoint() int {
	n := 1
	if r.cfg.Load.Profile == "sweep" {
		n = load.SyncBlocks + 1 + r.cfg.Load.Rates
	}
	if r.cfg.Gates.AICRMinOutputTokS != nil || r.cfg.Gates.AICRMaxTTFTP99Ms != nil {
		n++
	}
	return n
}

// withRungs returns ctx carrying the rung callback of one endpoint (its label, e.g. "gpu 2").
func (r *run) withRungs(ctx context.Context, unit string) context.Context {
	if r.prog == nil {
		return ctx
	}
	ctx = context.WithValue(ctx, planKey, func(after int, left time.Duration) { r.prog.Plan(unit, after, left) })
	return context.WithValue(ctx, rungKey, func(i int, label string) { r.prog.Step(unit, i+1, label) })
}

func unitName(model string, gpus []int, models int) string {
	u := "gpu " + term.GPUList(gpus)
	if models > 1 {
		u = fmt.Sprintf("%s on %s", model, u)
	}
	return u
}
