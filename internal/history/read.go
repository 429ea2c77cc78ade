package history

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// RunInfo is one recorded run.
type RunInfo struct {
	ID          string    `json:"run_id"`
	StartedAt   time.Time `json:"started_at"`
	ToolVersion string    `json:"tool_version"`
	Backend     string    `json:"backend"`
	Environment string    `json:"environment"`
	Fingerprint string    `json:"fingerprint"`
	Status      string    `json:"status"`
	Complete    bool      `json:"complete"`
	Hosts       int       `json:"hosts"`
	Nodes       []string  `json:"nodes"` // the nodes it measured, by name
}

// Runs lists the newest runs first (at most limit; 0: all), those that measured host when given.
func (s *Store) Runs(ctx context.Context, host string, limit int) ([]RunInfo, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := `SELECT id, started_ms, tool_version, backend, environment, fingerprint, status, complete, hosts FROM runs`
	var args []any
	if host != "" {
		q += ` WHERE id IN (SELECT run_id FROM nodes WHERE host = ?)`
		args = append(args, host)
	}
	q += ` ORDER BY started_ms DESC, id DESC`
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	var out []RunInfo
	err := s.each(ctx, q, args, func(rs *sql.Rows) error {
		var r RunInfo
		var ms int64
		var complete int
		if err := rs.Scan(&r.ID, &ms, &r.ToolVersion, &r.Backend, &r.Environment, &r.Fingerprint, &r.Status, &complete, &r.Hosts); err != nil {
			return err
		}
		r.StartedAt, r.Complete = time.UnixMilli(ms).UTC(), complete == 1
		out = append(out, r)
		return nil
	})
	if err != nil || len(out) == 0 {
		return out, err
	}
	return out, s.runNodes(ctx, out)
}

// each runs q (? placeholders) and hands every row to scan; the rows are closed when it returns.
func (s *Store) each(ctx context.Context, q string, args []any, scan func(*sql.Rows) error) error {
	rs, err := s.db.QueryContext(ctx, s.q(q), args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		if err := scan(rs); err != nil {
			return err
		}
	}
	return errors.Join(rs.Err(), rs.Close()) // a read cut short fails the caller (Pin pins all or none)
}

// runNodes fills each run's Nodes, in one query.
func (s *Store) runNodes(ctx context.Context, runs []RunInfo) error {
	args := make([]any, len(runs))
	at := map[string]int{}
	for i, r := range runs {
		args[i], at[r.ID] = r.ID, i
	}
	q := `SELECT run_id, host FROM nodes WHERE run_id IN (?` + strings.Repeat(", ?", len(runs)-1) + `) ORDER BY host`
	return s.each(ctx, q, args, func(rs *sql.Rows) error {
		var id, host string
		if err := rs.Scan(&id, &host); err != nil {
			return err
		}
		runs[at[id]].Nodes = append(runs[at[id]].Nodes, host)
		return nil
	})
}

// acceptanceOf is the acceptance row of one node or GPU under fp (ok false: none).
func (s *Store) acceptanceOf(ctx context.Context, scope, subject, fp string) (results.Acceptance, bool, error) {
	a := results.Acceptance{Scope: scope}
	var pinned int
	var ms int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT run_id, host, pinned, at_ms FROM acceptance WHERE scope = ? AND subject = ? AND fingerprint = ?`),
		scope, subject, fp).Scan(&a.RunID, &a.Host, &pinned, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return a, false, nil
	}
	if err != nil {
		return a, false, err
	}
	a.Pinned, a.At = pinned == 1, time.UnixMilli(ms).UTC()
	if scope == ScopeGPU {
		a.UUID = subject
	}
	return a, true, nil
}

const figureColumns = `uuid, model, metric, unit, value, ci_lo, ci_hi, ci_level, samples, higher, lower_bound, client_limited, req_s, judged`

// figures reads the stored figures of one run, for a host (uuid "") or one GPU.
func (s *Store) figures(ctx context.Context, runID, host, uuid string) ([]results.StoredFigure, error) {
	col, v := "host", host
	if uuid != "" {
		col, v = "uuid", uuid
	}
	byRun, err := s.scanFigures(ctx, `SELECT run_id, `+figureColumns+` FROM figures WHERE run_id = ? AND `+col+` = ?`, runID, v)
	return byRun[runID], err
}

// scanFigures runs q, which selects run_id then figureColumns, and groups the figures by run.
func (s *Store) scanFigures(ctx context.Context, q string, args ...any) (map[string][]results.StoredFigure, error) {
	out := map[string][]results.StoredFigure{}
	err := s.each(ctx, q, args, func(rs *sql.Rows) error {
		var f results.StoredFigure
		var run string
		if err := scanFigure(rs, &f, &run); err != nil {
			return err
		}
		out[run] = append(out[run], f)
		return nil
	})
	return out, err
}

// scanFigure scans a row of the leading columns (into lead) then figureColumns (into f).
func scanFigure(rs *sql.Rows, f *results.StoredFigure, lead ...any) error {
	var lo, hi, lvl sql.NullFloat64
	var higher, lb, cl, judged int
	if err := rs.Scan(append(lead, &f.UUID, &f.Model, &f.Metric, &f.Unit, &f.Value, &lo, &hi, &lvl, &f.Samples, &higher, &lb, &cl, &f.ReqS, &judged)...); err != nil {
		return err
	}
	if lo.Valid && hi.Valid {
		f.CI = &results.Interval{Lo: lo.Float64, Hi: hi.Float64, Level: lvl.Float64}
	}
	f.HigherIsBetter, f.LowerBound, f.ClientLimited, f.Judged = higher == 1, lb == 1, cl == 1, judged == 1
	return nil
}

// OwnRuns is how many of a node's latest runs the judge weighs a figure's run-to-run spread
// over: enough for a prediction interval of some use, few enough that a slow change of the node
// over months is not taken for its spread.
const OwnRuns = 10

// earlier reads the figures of host's latest runs under fp other than run that ended ok or
// inconclusive (a flagged or failed run's figures may be the fault itself), newest first (at most
// OwnRuns; none with fewer than three, which the judge does not weigh): two queries a node.
func (s *Store) earlier(ctx context.Context, host, fp, run string) ([]results.EarlierRun, error) {
	var ids []string
	args := []any{host}
	q := `SELECT n.run_id FROM nodes n JOIN runs r ON r.id = n.run_id
		WHERE n.host = ? AND r.fingerprint = ? AND n.status IN (?, ?) AND n.run_id <> ? ORDER BY r.started_ms DESC, r.id DESC LIMIT ?`
	qargs := []any{host, fp, string(results.StatusOK), string(results.StatusInconclusive), run, OwnRuns}
	err := s.each(ctx, q, qargs, func(rs *sql.Rows) error {
		var id string
		err := rs.Scan(&id)
		ids, args = append(ids, id), append(args, id)
		return err
	})
	if err != nil || len(ids) < 3 {
		return nil, err
	}
	byRun, err := s.scanFigures(ctx, `SELECT run_id, `+figureColumns+` FROM figures WHERE host = ? AND run_id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	out := make([]results.EarlierRun, 0, len(ids))
	for _, id := range ids {
		out = append(out, results.EarlierRun{RunID: id, Figures: byRun[id]})
	}
	return out, nil
}

// ofGPU keeps the figures of one GPU of a node's earlier runs.
func ofGPU(runs []results.EarlierRun, uuid string) []results.EarlierRun {
	out := make([]results.EarlierRun, 0, len(runs))
	for _, r := range runs {
		var figs []results.StoredFigure
		for _, f := range r.Figures {
			if f.UUID == uuid {
				figs = append(figs, f)
			}
		}
		out = append(out, results.EarlierRun{RunID: r.RunID, Figures: figs})
	}
	return out
}

// Acceptance reads, for every host of sum and every GPU found on it, its acceptance run under fp
// with that run's figures, and says in notes what has none (a first run, or earlier runs under
// another plan only, which are not compared). The run itself is never its own reference.
func (s *Store) Acceptance(ctx context.Context, sum *results.Summary, fp string) ([]results.Acceptance, []string, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var out []results.Acceptance
	var notes []string
	for hi := range sum.Hosts {
		h := &sum.Hosts[hi]
		a, ok, err := s.acceptanceOf(ctx, ScopeNode, h.Name, fp)
		if err != nil {
			return nil, nil, err
		}
		earlier, err := s.earlier(ctx, h.Name, fp, sum.RunID)
		if err != nil {
			return nil, nil, err
		}
		if ok && a.RunID != sum.RunID {
			if a.Figures, err = s.figures(ctx, a.RunID, a.Host, ""); err != nil {
				return nil, nil, err
			}
			a.Earlier = earlier
			out = append(out, a)
		} else {
			note, err := s.noAcceptance(ctx, h.Name, fp)
			if err != nil {
				return nil, nil, err
			}
			notes = append(notes, note)
		}
		for _, g := range h.Discovery.GPUs {
			if g.UUID == "" {
				continue
			}
			a, ok, err := s.acceptanceOf(ctx, ScopeGPU, g.UUID, fp)
			if err != nil {
				return nil, nil, err
			}
			if !ok || a.RunID == sum.RunID {
				continue
			}
			if a.Figures, err = s.figures(ctx, a.RunID, "", g.UUID); err != nil {
				return nil, nil, err
			}
			a.Serial = g.Serial
			a.Earlier = ofGPU(earlier, g.UUID)
			if a.Host != h.Name {
				notes = append(notes, fmt.Sprintf("gpu %d (%s) on %s was on %s in its acceptance run %s: it keeps its history (followed by UUID)", g.Index, g.UUID, h.Name, a.Host, a.RunID))
			}
			out = append(out, a)
		}
	}
	return out, notes, nil
}

// noAcceptance says why a node is not compared: no run yet, or runs under other plans only.
func (s *Store) noAcceptance(ctx context.Context, host, fp string) (string, error) {
	var other, same int
	err := s.db.QueryRowContext(ctx, s.q(`SELECT
		COALESCE(SUM(CASE WHEN r.fingerprint <> ? THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN r.fingerprint = ? THEN 1 ELSE 0 END), 0)
		FROM nodes n JOIN runs r ON r.id = n.run_id WHERE n.host = ?`), fp, fp, host).Scan(&other, &same)
	if err != nil {
		return "", err
	}
	switch {
	case other > 0 && same == 0:
		return fmt.Sprintf("node %s: %d earlier run(s) under another plan (a different load, model, engine or health settings): not compared; this plan's first ok run becomes its acceptance", host, other), nil
	case same > 0:
		return fmt.Sprintf("node %s: %d earlier run(s) under this plan, none ok: no acceptance yet (its first ok run becomes it, or pin one: gpuvet history pin)", host, same), nil
	}
	return fmt.Sprintf("node %s: no earlier run: this run becomes its acceptance if it ends ok", host), nil
}

// Trend is one node's (uuid "") or one GPU's runs, oldest first, at most limit (0: 100) of the
// newest: each run's status and figures (a node's: the median over its GPUs). Runs under another
// fingerprint than fp are marked Other (fp "": none is).
func (s *Store) Trend(ctx context.Context, host, uuid, fp string, limit int) ([]results.TrendPoint, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if limit <= 0 {
		limit = 100
	}
	var runQ string
	var args []any
	if uuid != "" {
		runQ = `SELECT r.id, r.started_ms, g.status, g.action, r.fingerprint, g.host FROM gpus g JOIN runs r ON r.id = g.run_id WHERE g.uuid = ?`
		args = append(args, uuid)
	} else {
		runQ = `SELECT r.id, r.started_ms, n.status, n.action, r.fingerprint, n.host FROM nodes n JOIN runs r ON r.id = n.run_id WHERE n.host = ?`
		args = append(args, host)
	}
	var pts []results.TrendPoint
	pos := map[string]int{}
	runQ += fmt.Sprintf(` ORDER BY r.started_ms DESC, r.id DESC LIMIT %d`, limit)
	err := s.each(ctx, runQ, args, func(rs *sql.Rows) error {
		var p results.TrendPoint
		var ms int64
		var st, f string
		if err := rs.Scan(&p.RunID, &ms, &st, &p.Action, &f, &p.Host); err != nil {
			return err
		}
		p.At, p.Status, p.Other, p.Figures = time.UnixMilli(ms).UTC(), results.Status(st), fp != "" && f != fp, map[string]float64{}
		if _, dup := pos[p.RunID]; !dup {
			pos[p.RunID] = len(pts)
			pts = append(pts, p)
		}
		return nil
	})
	if err != nil || len(pts) == 0 {
		return nil, err
	}
	col := "host"
	if uuid != "" {
		col = "uuid"
	}
	figQ := `SELECT run_id, uuid, model, metric, value FROM figures WHERE ` + col + ` = ? AND run_id IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(pts)), ", ") + `)`
	for _, p := range pts {
		args = append(args, p.RunID)
	}
	vals := map[string]byGPU{} // run -> its figures (a tp group's once)
	err = s.each(ctx, figQ, args, func(rs *sql.Rows) error {
		var f results.StoredFigure
		var run string
		if err := rs.Scan(&run, &f.UUID, &f.Model, &f.Metric, &f.Value); err != nil {
			return err
		}
		if vals[run] == nil {
			vals[run] = byGPU{}
		}
		vals[run].add(f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for run, figs := range vals {
		pts[pos[run]].Figures = figs.medians()
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].At.Before(pts[j].At) })
	return pts, nil
}

// Pin makes runID the acceptance, under that run's fingerprint, of one node (host), one GPU
// (uuid), or, with neither, of every node and GPU the run measured. It returns what it pinned.
func (s *Store) Pin(ctx context.Context, runID, host, uuid string) ([]string, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var fp string
	var ms int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT fingerprint, started_ms FROM runs WHERE id = ?`), runID).Scan(&fp, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %s is not in the history (gpuvet history runs lists them)", runID)
	}
	if err != nil {
		return nil, err
	}
	type subj struct{ scope, subject, host, status string }
	var subs []subj
	// A read cut short would pin only some subjects: any error stops the pin.
	err = s.each(ctx, `SELECT host, uuid, status FROM gpus WHERE run_id = ?`, []any{runID}, func(rs *sql.Rows) error {
		var h, u, st string
		if err := rs.Scan(&h, &u, &st); err != nil {
			return err
		}
		if u != "" && (uuid == "" && (host == "" || host == h) || uuid == u) {
			subs = append(subs, subj{ScopeGPU, u, h, st})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.each(ctx, `SELECT host, status FROM nodes WHERE run_id = ?`, []any{runID}, func(rs *sql.Rows) error {
		var h, st string
		if err := rs.Scan(&h, &st); err != nil {
			return err
		}
		if uuid == "" && (host == "" || host == h) {
			subs = append(subs, subj{ScopeNode, h, h, st})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(subs) == 0 {
		return nil, fmt.Errorf("run %s measured no node %q / GPU %q", runID, host, uuid)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var out []string
	for _, x := range subs {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO acceptance (scope, subject, fingerprint, run_id, host, pinned, at_ms) VALUES (?, ?, ?, ?, ?, 1, ?)
			ON CONFLICT (scope, subject, fingerprint) DO UPDATE SET run_id = excluded.run_id, host = excluded.host, pinned = 1, at_ms = excluded.at_ms`),
			x.scope, x.subject, fp, runID, x.host, ms); err != nil {
			return nil, err
		}
		what := x.scope + " " + x.subject
		if x.status != string(results.StatusOK) {
			// Only an ok run claims the acceptance by itself (docs/history.md); a pin of another
			// says so, since later runs then drift against its figures as they were.
			what += fmt.Sprintf(" (it was %s in that run, not ok: its figures are the reference as they were)", x.status)
		}
		out = append(out, what)
	}
	return out, tx.Commit()
}

// Row is one stored figure with its run, for export.
type Row struct {
	RunID       string    `json:"run_id"`
	StartedAt   time.Time `json:"started_at"`
	Fingerprint string    `json:"fingerprint"`
	Host        string    `json:"host"`
	results.StoredFigure
}

// Export reads every stored figure (of one node or GPU when given), oldest run first.
func (s *Store) Export(ctx context.Context, host, uuid string) ([]Row, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	q := `SELECT r.id, r.started_ms, r.fingerprint, f.host, f.uuid, f.model, f.metric, f.unit, f.value, f.ci_lo, f.ci_hi, f.ci_level, f.samples, f.higher, f.lower_bound, f.client_limited, f.req_s, f.judged
		FROM figures f JOIN runs r ON r.id = f.run_id`
	var args []any
	var where []string
	if host != "" {
		where, args = append(where, "f.host = ?"), append(args, host)
	}
	if uuid != "" {
		where, args = append(where, "f.uuid = ?"), append(args, uuid)
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY r.started_ms, r.id, f.host, f.uuid, f.model, f.metric"
	var out []Row
	err := s.each(ctx, q, args, func(rs *sql.Rows) error {
		var r Row
		var ms int64
		if err := scanFigure(rs, &r.StoredFigure, &r.RunID, &ms, &r.Fingerprint, &r.Host); err != nil {
			return err
		}
		r.StartedAt = time.UnixMilli(ms).UTC()
		out = append(out, r)
		return nil
	})
	return out, err
}
