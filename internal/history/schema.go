package history

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// migration is one step of the schema, as SQL per dialect; migrations run in order, each in the
// transaction that records its version. A new column or table is a new migration at the end: a
// shipped one is never edited.
type migration struct {
	version int
	sql     map[string][]string
}

// schema1 is written once for both dialects: {REAL} is the floating type of each.
var schema1 = []string{
	`CREATE TABLE runs (
		id TEXT PRIMARY KEY,
		started_ms BIGINT NOT NULL,
		finished_ms BIGINT,
		tool_version TEXT NOT NULL,
		tool_commit TEXT NOT NULL,
		backend TEXT NOT NULL,
		environment TEXT NOT NULL,
		fingerprint TEXT NOT NULL,
		status TEXT NOT NULL,
		complete INTEGER NOT NULL,
		hosts INTEGER NOT NULL
	)`,
	`CREATE INDEX runs_started ON runs (started_ms)`,
	`CREATE TABLE nodes (
		run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		host TEXT NOT NULL,
		status TEXT NOT NULL,
		PRIMARY KEY (run_id, host)
	)`,
	`CREATE INDEX nodes_host ON nodes (host)`,
	`CREATE TABLE gpus (
		run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		host TEXT NOT NULL,
		idx INTEGER NOT NULL,
		uuid TEXT NOT NULL,
		serial TEXT NOT NULL,
		name TEXT NOT NULL,
		status TEXT NOT NULL,
		PRIMARY KEY (run_id, host, idx)
	)`,
	`CREATE INDEX gpus_uuid ON gpus (uuid)`,
	`CREATE TABLE figures (
		run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		host TEXT NOT NULL,
		uuid TEXT NOT NULL,
		model TEXT NOT NULL,
		metric TEXT NOT NULL,
		unit TEXT NOT NULL,
		value {REAL} NOT NULL,
		ci_lo {REAL},
		ci_hi {REAL},
		ci_level {REAL},
		samples INTEGER NOT NULL,
		higher INTEGER NOT NULL,
		lower_bound INTEGER NOT NULL,
		client_limited INTEGER NOT NULL,
		req_s {REAL} NOT NULL,
		judged INTEGER NOT NULL
	)`,
	`CREATE INDEX figures_run_host ON figures (run_id, host)`,
	`CREATE INDEX figures_uuid ON figures (uuid, run_id)`,
	`CREATE TABLE verdicts (
		run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
		host TEXT NOT NULL,
		scope TEXT NOT NULL,
		subject TEXT NOT NULL,
		check_id TEXT NOT NULL,
		result TEXT NOT NULL,
		value {REAL},
		threshold {REAL},
		reason TEXT NOT NULL
	)`,
	`CREATE INDEX verdicts_run ON verdicts (run_id, host)`,
	// acceptance holds each node's (subject: host) and GPU's (subject: UUID) reference run per plan
	// fingerprint: the first ok run claims it (ON CONFLICT DO NOTHING), a pin replaces it. Its runs
	// are kept by retention.
	`CREATE TABLE acceptance (
		scope TEXT NOT NULL,
		subject TEXT NOT NULL,
		fingerprint TEXT NOT NULL,
		run_id TEXT NOT NULL,
		host TEXT NOT NULL,
		pinned INTEGER NOT NULL,
		at_ms BIGINT NOT NULL,
		PRIMARY KEY (scope, subject, fingerprint)
	)`,
	`CREATE INDEX acceptance_run ON acceptance (run_id)`,
}

func forDialect(stmts []string, dialect string) []string {
	real := "REAL"
	if dialect == Postgres {
		real = "DOUBLE PRECISION"
	}
	out := make([]string, len(stmts))
	for i, s := range stmts {
		out[i] = strings.ReplaceAll(s, "{REAL}", real)
	}
	return out
}

// schema2 records what each node's and GPU's findings asked for (results.Host.Action,
// GPUVerdict.Action; issue 50): "" in the rows written before.
var schema2 = []string{
	`ALTER TABLE nodes ADD COLUMN action TEXT NOT NULL DEFAULT ''`,
	`ALTER TABLE gpus ADD COLUMN action TEXT NOT NULL DEFAULT ''`,
}

var migrations = []migration{
	{1, map[string][]string{SQLite: forDialect(schema1, SQLite), Postgres: forDialect(schema1, Postgres)}},
	{2, map[string][]string{SQLite: schema2, Postgres: schema2}},
}

// SchemaVersion is the version this gpuvet writes; a store at a newer version is refused (a newer
// gpuvet wrote it).
func SchemaVersion() int { return migrations[len(migrations)-1].version }

// migrate brings the store to SchemaVersion, one migration per transaction. Two gpuvets opening a
// new store at once do not both create it: SQLite's BEGIN IMMEDIATE and PostgreSQL's transaction
// advisory lock make the second wait and then find the version already there.
func (s *Store) migrate(ctx context.Context) error {
	for _, m := range migrations {
		if err := s.stepWhenFree(ctx, m); err != nil {
			return fmt.Errorf("migration %d: %w", m.version, err)
		}
	}
	v, err := s.version(ctx, s.db)
	if err != nil {
		return err
	}
	if v > SchemaVersion() {
		return fmt.Errorf("schema version %d is newer than this gpuvet's %d: use the gpuvet that wrote it, or a newer one", v, SchemaVersion())
	}
	return nil
}

// stepWhenFree runs migration m, again while SQLite answers SQLITE_BUSY for up to 10 s: a new
// database's first connections switch it to WAL, and while one does that SQLite answers a second's
// BEGIN IMMEDIATE with SQLITE_BUSY at once, without waiting on busy_timeout (seen when six gpuvets
// opened a new store at once on a busy machine).
func (s *Store) stepWhenFree(ctx context.Context, m migration) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.step(ctx, m)
		if err == nil || s.dialect != SQLite || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rowQueryer is a *sql.DB or a *sql.Tx.
type rowQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) version(ctx context.Context, db rowQueryer) (int, error) {
	var v int
	err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v)
	return v, err
}

func (s *Store) step(ctx context.Context, m migration) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if s.dialect == Postgres {
		// One lock id for gpuvet's migrations: a second migrator waits here for the first's commit.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(4747)`); err != nil {
			return err
		}
	}
	// Inside the lock: PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe against a second one
	// at the same time (a duplicate-type error; seen when two runs opened a new store at once).
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("schema_version: %w", err)
	}
	v, err := s.version(ctx, tx)
	if err != nil {
		return err
	}
	if v >= m.version {
		return nil
	}
	for _, stmt := range m.sql[s.dialect] {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%w (in %.60s…)", err, strings.Join(strings.Fields(stmt), " "))
		}
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO schema_version (version) VALUES (?)`), m.version); err != nil {
		return err
	}
	return tx.Commit()
}
