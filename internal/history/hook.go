package history

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// TrendHosts bounds the hosts whose trend a run's summary carries for its report (a fleet of a
// thousand nodes shows the first ones; `gpuvet history trend` reads any).
const TrendHosts = 64

// TrendRuns is how many of a node's newest runs its trend shows.
const TrendRuns = 20

// Session is one run's use of the store: opened (and migrated) once, by its first Prepare or
// Record, and closed by Record, the run's last use (or Close). Prepare and Record of a run share
// it, so a run opens its store once, not twice; a Session closed may be used again (it reopens).
type Session struct {
	mu sync.Mutex
	st *Store
}

// open opens the store unless it is open; a failed open is tried again by the next use.
func (se *Session) open(ctx context.Context, h config.History) (*Store, error) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.st == nil {
		st, err := Open(ctx, h)
		if err != nil {
			return nil, err
		}
		se.st = st
	}
	return se.st, nil
}

// Close closes the store if it is open.
func (se *Session) Close() {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.st != nil {
		se.st.Close()
		se.st = nil
	}
}

// Prepare is the history's step before the judge (host pipeline and fleet merge alike): it opens
// the store the plan names and puts into s.History the plan's fingerprint, each node's and GPU's
// acceptance run with its figures, and each node's trend, so that the judge (which reads results
// only) can compare and the report can show them. A store that cannot be read leaves a caveat:
// the run and its measurements go on.
func (se *Session) Prepare(ctx context.Context, s *results.Summary, plan *config.Plan) {
	h := plan.Config.History
	if !h.Enabled || s == nil {
		return
	}
	// An interrupted run is judged too: bounded by history.timeout, not by its cancelled context.
	ctx = context.WithoutCancel(ctx)
	fp := Fingerprint(plan.Config)
	s.History = &results.History{Fingerprint: fp}
	st, err := se.open(ctx, h)
	if err != nil {
		failed(s, "not read", err)
		return
	}
	s.History.Store = st.Name()
	acc, notes, err := st.Acceptance(ctx, s, fp)
	if err != nil {
		failed(s, "not read", err)
		return
	}
	s.History.Acceptance, s.History.Notes = acc, notes
	for i, host := range s.Hosts {
		if i == TrendHosts {
			s.History.Notes = append(s.History.Notes, fmt.Sprintf("trends of the first %d nodes only: gpuvet history trend --node NAME shows any", TrendHosts))
			break
		}
		pts, err := st.Trend(ctx, host.Name, "", fp, TrendRuns)
		if err != nil {
			failed(s, "not read", err)
			return
		}
		s.History.Trend = append(s.History.Trend, pts...)
	}
}

// Record is the history's step once the run is judged: it appends the run to the store (and its
// ok nodes and GPUs become their acceptance where none is set), then closes the store. It runs
// even when the run was interrupted (bounded by history.timeout, not by the run's cancelled
// context); a write that fails is a caveat: the run's results are in summary.json all the same.
func (se *Session) Record(ctx context.Context, s *results.Summary, plan *config.Plan) {
	defer se.Close()
	h := plan.Config.History
	if !h.Enabled || s == nil {
		return
	}
	if s.History == nil {
		s.History = &results.History{Fingerprint: Fingerprint(plan.Config)}
	}
	defer trimAcceptance(s.History)
	ctx = context.WithoutCancel(ctx)
	st, err := se.open(ctx, h)
	if err != nil {
		failed(s, "not recorded", err)
		return
	}
	s.History.Store = st.Name()
	stats, err := st.Record(ctx, s, s.History.Fingerprint, h.RetentionDays)
	if err != nil {
		failed(s, "not recorded", fmt.Errorf("%s: %w", st.Name(), err))
		return
	}
	s.History.Recorded = stats
	addCurrent(s)
}

// trimAcceptance drops the acceptance runs' figures (and the earlier runs') from the summary once the run is judged (Record
// comes after the last judging): each compared figure is in History.Drift with both values, and
// the rest are in the store. A 1,000-node fleet's would be some 270,000 figures (tens of MB).
func trimAcceptance(h *results.History) {
	for i := range h.Acceptance {
		h.Acceptance[i].Figures, h.Acceptance[i].Earlier = nil, nil
	}
}

// addCurrent appends this run to each node's trend (read before the run was recorded), so that the
// report shows it beside the earlier runs.
func addCurrent(s *results.Summary) {
	for _, p := range s.History.Trend {
		if p.RunID == s.RunID {
			return
		}
	}
	for i := range s.Hosts {
		if i == TrendHosts {
			break
		}
		h := &s.Hosts[i]
		figs := byGPU{}
		for _, f := range judge.KeyFigures(h) {
			figs.add(f)
		}
		s.History.Trend = append(s.History.Trend, results.TrendPoint{Host: h.Name, RunID: s.RunID,
			At: s.StartedAt.Truncate(time.Millisecond).UTC(), Status: h.Status, Figures: figs.medians()})
	}
}

// byGPU is a run's figures by their key (judge.FigureKey), then by GPU: a node's trend point is
// the median of each over its GPUs, a tp group's figure counted once.
type byGPU map[string]map[string]float64

func (b byGPU) add(f results.StoredFigure) {
	k := judge.FigureKey(f)
	if b[k] == nil {
		b[k] = map[string]float64{}
	}
	b[k][f.UUID] = f.Value
}

func (b byGPU) medians() map[string]float64 {
	out := make(map[string]float64, len(b))
	for k, gpus := range b {
		out[k] = compare.Median(slices.Collect(maps.Values(gpus)))
	}
	return out
}

// failed records a store error as the history's error and a caveat: never a failed run.
func failed(s *results.Summary, what string, err error) {
	msg := fmt.Sprintf("history %s: %v (the run's results are in summary.json; history.enabled=false turns the history off)", what, err)
	s.History.Error = cmp.Or(s.History.Error, msg)
	s.Caveats = append(s.Caveats, msg)
}
