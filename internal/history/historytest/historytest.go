// Package historytest gives tests the two history stores, each fresh: an SQLite file in the
// test's temporary folder, and a database of its own on the PostgreSQL server GPUVET_TEST_PG_URL
// names (scripts/pg-test.sh starts one; .ci/run does), dropped when the test ends. Without that
// server the PostgreSQL case skips and says how to get one.
package historytest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/gpuvet/gpuvet/internal/config"
)

// PasswordEnv is the variable the scratch server's password is in: not PGPASSWORD, which pgx
// would read by itself, so that tests show history.password_env is what carries it.
const PasswordEnv = "GPUVET_TEST_PG_PASSWORD"

// Kind is one store.
type Kind struct {
	Name string
	// Fresh gives the history settings of a new, empty store (or skips the test).
	Fresh func(t testing.TB) config.History
}

// Kinds are SQLite and PostgreSQL.
var Kinds = []Kind{{"sqlite", SQLite}, {"postgres", Postgres}}

// SQLite is a new SQLite store in t's temporary folder.
func SQLite(t testing.TB) config.History {
	h := config.Defaults().History
	h.URL = "sqlite://" + filepath.Join(t.TempDir(), "history.db")
	return h
}

// Postgres is a new database on the server GPUVET_TEST_PG_URL names, dropped when t ends; it skips
// t when no server is given.
func Postgres(t testing.TB) config.History {
	base := os.Getenv("GPUVET_TEST_PG_URL")
	if base == "" {
		t.Skip("no PostgreSQL: set GPUVET_TEST_PG_URL and " + PasswordEnv + " (scripts/pg-test.sh start prints them; .ci/run starts one)")
	}
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatalf("GPUVET_TEST_PG_URL: %v", err)
	}
	cfg.Password = os.Getenv(PasswordEnv)
	admin := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { admin.Close() })
	name := fmt.Sprintf("gpuvet_test_%d_%d", time.Now().UnixNano(), rand.IntN(1_000_000))
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	u := strings.Replace(base, "/postgres?", "/"+name+"?", 1)
	if u == base {
		t.Fatalf("GPUVET_TEST_PG_URL %q: want a URL whose database is postgres, with parameters (…/postgres?sslmode=disable)", base)
	}
	h := config.Defaults().History
	h.URL, h.PasswordEnv = u, PasswordEnv
	return h
}

// Sets are the --set arguments that point a plan at h (and turn the history on, whatever the
// test binary's environment says).
func Sets(h config.History) []string {
	return []string{"history.enabled=true", "history.url=" + h.URL, "history.password_env=" + h.PasswordEnv}
}
