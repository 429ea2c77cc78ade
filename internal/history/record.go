package history

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Acceptance scopes.
const (
	ScopeNode = "node"
	ScopeGPU  = "gpu"
)

// maxParams bounds the placeholders of one multi-row INSERT (SQLite allows 32766, PostgreSQL 65535).
const maxParams = 30000

var (
	nodeCols    = []string{"run_id", "host", "status", "action"}
	gpuCols     = []string{"run_id", "host", "idx", "uuid", "serial", "name", "status", "action"}
	figureCols  = []string{"run_id", "host", "uuid", "model", "metric", "unit", "value", "ci_lo", "ci_hi", "ci_level", "samples", "higher", "lower_bound", "client_limited", "req_s", "judged"}
	verdictCols = []string{"run_id", "host", "scope", "subject", "check_id", "result", "value", "threshold", "reason"}
)

// maxRetentionDays is the first retention in days a time.Duration cannot hold.
const maxRetentionDays = int(math.MaxInt64/int64(24*time.Hour)) + 1

// rows is what one run adds.
type rows struct {
	nodes, gpus, figures, verdicts [][]any
	// claims are the acceptance rows this run claims if nobody has one yet: its ok nodes and GPUs.
	claims [][]any
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gpuStatus is a GPU's status in a run and the action it asks for: the judge's verdict (every
// surface's); in a summary judged before verdicts, the worse of its health record and of the
// endpoints that ran on it, the host's when neither says.
func gpuStatus(h *results.Host, idx int) (results.Status, string) {
	for _, g := range h.GPUs {
		if g.Index == idx && g.Status != "" {
			return g.Status, g.Action
		}
	}
	var st results.Status
	if h.Health != nil {
		for _, g := range h.Health.GPUs {
			if g.GPU.Index == idx {
				st = results.Worse(st, g.Status)
				if len(g.Flags) > 0 {
					st = results.Worse(st, results.StatusFlag)
				}
			}
		}
	}
	for _, m := range h.Models {
		for _, ep := range m.Endpoints {
			if slices.Contains(ep.GPUs, idx) {
				st = results.Worse(st, ep.Status)
			}
		}
	}
	if st == "" || st == results.StatusSkipped {
		st = h.Status
	}
	return st, ""
}

// rowsOf turns a judged summary into the rows of its run.
func rowsOf(s *results.Summary, fp string) rows {
	var r rows
	at := s.StartedAt.UnixMilli()
	ok := func(st results.Status) bool { return s.Complete && st == results.StatusOK }
	for hi := range s.Hosts {
		h := &s.Hosts[hi]
		r.nodes = append(r.nodes, []any{s.RunID, h.Name, string(h.Status), h.Action})
		if ok(h.Status) {
			r.claims = append(r.claims, []any{ScopeNode, h.Name, fp, s.RunID, h.Name, 0, at})
		}
		gpus := h.Discovery.GPUs
		if len(gpus) == 0 && h.Health != nil {
			for _, g := range h.Health.GPUs {
				gpus = append(gpus, g.GPU)
			}
		}
		for _, g := range gpus {
			st, action := gpuStatus(h, g.Index)
			r.gpus = append(r.gpus, []any{s.RunID, h.Name, g.Index, g.UUID, g.Serial, g.Name, string(st), action})
			if g.UUID != "" && ok(st) {
				r.claims = append(r.claims, []any{ScopeGPU, g.UUID, fp, s.RunID, h.Name, 0, at})
			}
		}
		for _, f := range judge.KeyFigures(h) {
			var lo, hi, lvl any
			if f.CI != nil {
				lo, hi, lvl = f.CI.Lo, f.CI.Hi, f.CI.Level
			}
			r.figures = append(r.figures, []any{s.RunID, h.Name, f.UUID, f.Model, f.Metric, f.Unit, f.Value, lo, hi, lvl,
				f.Samples, b2i(f.HigherIsBetter), b2i(f.LowerBound), b2i(f.ClientLimited), f.ReqS, b2i(f.Judged)})
		}
		r.verdicts = append(r.verdicts, verdictRows(s.RunID, h)...)
	}
	return r
}

// verdictRows are every verdict of the host's endpoints and every flag it raised.
func verdictRows(runID string, h *results.Host) [][]any {
	var out [][]any
	for _, m := range h.Models {
		for _, ep := range m.Endpoints {
			subj := m.Model + " on gpu " + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ep.GPUs)), ","), "[]")
			for _, v := range ep.Verdicts {
				out = append(out, []any{runID, h.Name, "gpu", subj, v.Check, v.Result, ptr(v.Value), ptr(v.Threshold), v.Reason})
			}
		}
	}
	for _, fl := range h.AllFlags() {
		out = append(out, []any{runID, h.Name, fl.Scope, fl.Subject, fl.Check, "flag", nil, nil, fl.Reason})
	}
	return out
}

func ptr(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// Record appends a judged run: its row, nodes, GPUs, figures and verdicts, in one transaction;
// its ok nodes and GPUs become their acceptance under fp where none is set yet; then runs older
// than retentionDays (0: none) are dropped, but for acceptance runs. Recording the same run id
// again replaces it.
func (s *Store) Record(ctx context.Context, sum *results.Summary, fp string, retentionDays int) (*results.RecordedStats, error) {
	start := time.Now()
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	r := rowsOf(sum, fp)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM runs WHERE id = ?`), sum.RunID); err != nil {
		return nil, err
	}
	var fin any
	if !sum.FinishedAt.IsZero() {
		fin = sum.FinishedAt.UnixMilli()
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO runs (id, started_ms, finished_ms, tool_version, tool_commit, backend, environment, fingerprint, status, complete, hosts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`), sum.RunID, sum.StartedAt.UnixMilli(), fin, sum.Tool.Version, sum.Tool.Commit,
		sum.Backend, sum.Environment, fp, string(sum.Status), b2i(sum.Complete), len(sum.Hosts)); err != nil {
		return nil, err
	}
	for _, t := range []struct {
		table string
		cols  []string
		rows  [][]any
	}{{"nodes", nodeCols, r.nodes}, {"gpus", gpuCols, r.gpus}, {"figures", figureCols, r.figures}, {"verdicts", verdictCols, r.verdicts}} {
		if err := s.insertMany(ctx, tx, t.table, t.cols, t.rows, ""); err != nil {
			return nil, fmt.Errorf("%s: %w", t.table, err)
		}
	}
	if err := s.insertMany(ctx, tx, "acceptance", []string{"scope", "subject", "fingerprint", "run_id", "host", "pinned", "at_ms"}, r.claims,
		" ON CONFLICT (scope, subject, fingerprint) DO NOTHING"); err != nil {
		return nil, fmt.Errorf("acceptance: %w", err)
	}
	// A retention past what a time.Duration holds (some 292 years) keeps every run: multiplied
	// into one it would wrap negative and put the cut-off in the future.
	if retentionDays > 0 && retentionDays < maxRetentionDays {
		cut := time.Now().Add(-time.Duration(retentionDays) * 24 * time.Hour).UnixMilli()
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM runs WHERE started_ms < ? AND id NOT IN (SELECT run_id FROM acceptance)`), cut); err != nil {
			return nil, fmt.Errorf("retention: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return &results.RecordedStats{Nodes: len(r.nodes), GPUs: len(r.gpus), Figures: len(r.figures), Seconds: time.Since(start).Seconds()}, nil
}

// pgTypes are the PostgreSQL types of the columns that are not text, for insertMany's arrays.
var pgTypes = map[string]string{
	"idx": "integer", "samples": "integer", "higher": "integer", "lower_bound": "integer", "client_limited": "integer", "judged": "integer",
	"pinned": "integer", "at_ms": "bigint", "value": "double precision", "ci_lo": "double precision", "ci_hi": "double precision",
	"ci_level": "double precision", "req_s": "double precision", "threshold": "double precision",
}

// pgRowsPerInsert bounds one unnest INSERT (its arrays are built in memory).
const pgRowsPerInsert = 50000

// insertMany writes rows in few statements: on SQLite multi-row INSERTs of at most maxParams
// placeholders; on PostgreSQL one INSERT … SELECT FROM unnest(…) of one array per column, which
// PostgreSQL parses once for any number of rows (multi-row VALUES of a 1,000-node run took 8.5 s
// there, with 2 million placeholders to encode and parse; unnest, docs/history.md).
func (s *Store) insertMany(ctx context.Context, tx *sql.Tx, table string, cols []string, rows [][]any, suffix string) error {
	if s.dialect == Postgres {
		return s.insertUnnest(ctx, tx, table, cols, rows, suffix)
	}
	// SQLite: chunks of per rows through one prepared statement (parsed once), the rest in one more.
	per := max(1, maxParams/len(cols))
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	stmt := func(n int) string {
		return fmt.Sprintf("INSERT INTO %s (%s) VALUES %s%s", table, strings.Join(cols, ", "), strings.TrimSuffix(strings.Repeat(one+", ", n), ", "), suffix)
	}
	args := func(rows [][]any) []any {
		out := make([]any, 0, len(rows)*len(cols))
		for _, r := range rows {
			out = append(out, r...)
		}
		return out
	}
	if len(rows) >= per {
		full, err := tx.PrepareContext(ctx, stmt(per))
		if err != nil {
			return err
		}
		defer full.Close()
		for len(rows) >= per {
			if _, err := full.ExecContext(ctx, args(rows[:per])...); err != nil {
				return err
			}
			rows = rows[per:]
		}
	}
	if len(rows) > 0 {
		if _, err := tx.ExecContext(ctx, stmt(len(rows)), args(rows)...); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) insertUnnest(ctx context.Context, tx *sql.Tx, table string, cols []string, rows [][]any, suffix string) error {
	for len(rows) > 0 {
		n := min(pgRowsPerInsert, len(rows))
		args := make([]any, len(cols))
		casts := make([]string, len(cols))
		for j, c := range cols {
			typ := cmp.Or(pgTypes[c], "text")
			casts[j] = fmt.Sprintf("$%d::%s[]", j+1, typ)
			args[j] = column(rows[:n], j, typ)
		}
		q := fmt.Sprintf("INSERT INTO %s (%s) SELECT * FROM unnest(%s)%s", table, strings.Join(cols, ", "), strings.Join(casts, ", "), suffix)
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// column is column j of rows as a typed slice for a PostgreSQL array (nil values become NULLs).
func column(rows [][]any, j int, typ string) any {
	switch typ {
	case "integer", "bigint":
		out := make([]int64, len(rows))
		for i, r := range rows {
			switch v := r[j].(type) {
			case int:
				out[i] = int64(v)
			case int64:
				out[i] = v
			}
		}
		return out
	case "double precision":
		out := make([]*float64, len(rows))
		for i, r := range rows {
			if v, ok := r[j].(float64); ok {
				out[i] = &v
			}
		}
		return out
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i], _ = r[j].(string)
	}
	return out
}
