package history

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

var ctx = context.Background()

// The schema is versioned: a second open migrates nothing, and a store a newer gpuvet wrote is
// refused with what to do.
func TestSchemaIsVersioned(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		st := mustOpen(t, h)
		if n := count(t, st, `SELECT COUNT(*) FROM schema_version`); n != len(migrations) {
			t.Fatalf("schema_version rows = %d, want %d (one a migration)", n, len(migrations))
		}
		st2 := mustOpen(t, h)
		if v, err := st2.version(ctx, st2.db); err != nil || v != SchemaVersion() {
			t.Fatalf("version = %d, %v; want %d", v, err, SchemaVersion())
		}
		if n := count(t, st2, `SELECT COUNT(*) FROM schema_version`); n != len(migrations) {
			t.Fatalf("a second open migrated again: %d rows", n)
		}
		if _, err := st.db.Exec(st.q(`INSERT INTO schema_version (version) VALUES (?)`), 99); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(ctx, h); err == nil || !strings.Contains(err.Error(), "newer than this gpuvet") {
			t.Fatalf("a newer schema: err = %v", err)
		}
	})
}

// A run is kept whole (run, nodes, GPUs by UUID and serial, figures with intervals, verdicts), and
// its ok nodes and GPUs become their acceptance; the next run reads that acceptance with its
// figures, and never itself.
func TestRecordThenAcceptance(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		st := mustOpen(t, h)
		t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
		first := synth("r1", t0, 2, 2, 1, uuidOf)
		stats, err := st.Record(ctx, first, "fp1", 0)
		if err != nil {
			t.Fatal(err)
		}
		if stats.Nodes != 2 || stats.GPUs != 4 || stats.Figures == 0 {
			t.Fatalf("recorded %+v", stats)
		}
		if n := count(t, st, `SELECT COUNT(*) FROM gpus WHERE serial = ? AND uuid = ?`, "SN000101", "GPU-0001-01"); n != 1 {
			t.Fatalf("GPU by UUID and serial: %d rows", n)
		}
		if n := count(t, st, `SELECT COUNT(*) FROM figures WHERE metric = ? AND ci_lo IS NOT NULL`, judge.MetricTPOTP50); n != 4 {
			t.Fatalf("TPOT p50 with its interval: %d rows, want 4", n)
		}
		if n := count(t, st, `SELECT COUNT(*) FROM verdicts WHERE check_id = ?`, "gate.ttft_p95"); n != 4 {
			t.Fatalf("verdicts: %d", n)
		}
		// The run itself is not its own reference.
		acc, _, err := st.Acceptance(ctx, first, "fp1")
		if err != nil || len(acc) != 0 {
			t.Fatalf("a run against itself: %v %+v", err, acc)
		}
		second := synth("r2", t0.Add(24*time.Hour), 2, 2, 0.9, uuidOf)
		acc, notes, err := st.Acceptance(ctx, second, "fp1")
		if err != nil {
			t.Fatal(err)
		}
		if len(acc) != 6 { // 2 nodes + 4 GPUs
			t.Fatalf("acceptance: %d entries, want 6: %+v (notes %v)", len(acc), acc, notes)
		}
		for _, a := range acc {
			if a.RunID != "r1" || !a.At.Equal(t0) || len(a.Figures) == 0 {
				t.Errorf("acceptance %s %s: run %s at %v, %d figures", a.Scope, a.Host+a.UUID, a.RunID, a.At, len(a.Figures))
			}
			for _, f := range a.Figures {
				if f.Metric == judge.MetricTPOTP50 && (f.CI == nil || f.CI.Level != 0.95 || f.Samples != 200 || f.HigherIsBetter) {
					t.Errorf("figure read back without its interval or samples: %+v", f)
				}
			}
		}
		// Under another plan: not compared, and said so.
		acc, notes, err = st.Acceptance(ctx, second, "fp2")
		if err != nil || len(acc) != 0 || len(notes) != 2 || !strings.Contains(notes[0], "another plan") {
			t.Fatalf("another fingerprint: %v %+v %q", err, acc, notes)
		}
	})
}

// Only an ok, complete run claims the acceptance: a flagged first run leaves the node without one
// (and says so), the next ok run claims it, and a later ok run does not take it over.
func TestFirstOKRunIsTheAcceptance(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		st := mustOpen(t, h)
		t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
		bad := synth("r0", t0, 1, 1, 1, uuidOf)
		bad.Hosts[0].Status = results.StatusFlag
		bad.Hosts[0].Models[0].Endpoints[0].Status = results.StatusFlag
		if _, err := st.Record(ctx, bad, "fp", 0); err != nil {
			t.Fatal(err)
		}
		_, notes, _ := st.Acceptance(ctx, synth("rx", t0, 1, 1, 1, uuidOf), "fp")
		if len(notes) != 1 || !strings.Contains(notes[0], "none ok") {
			t.Fatalf("notes %q", notes)
		}
		for i, id := range []string{"r1", "r2"} {
			if _, err := st.Record(ctx, synth(id, t0.Add(time.Duration(i+1)*time.Hour), 1, 1, 1, uuidOf), "fp", 0); err != nil {
				t.Fatal(err)
			}
		}
		acc, _, err := st.Acceptance(ctx, synth("r3", t0.Add(5*time.Hour), 1, 1, 1, uuidOf), "fp")
		if err != nil || len(acc) != 2 || acc[0].RunID != "r1" || acc[1].RunID != "r1" {
			t.Fatalf("acceptance %v %+v", err, acc)
		}
	})
}

// A GPU that moved to another node keeps its history: its acceptance is found by UUID, and the
// run says where it was.
func TestGPUMovedKeepsItsAcceptance(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		st := mustOpen(t, h)
		t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
		if _, err := st.Record(ctx, synth("r1", t0, 2, 1, 1, uuidOf), "fp", 0); err != nil {
			t.Fatal(err)
		}
		// Next run: node-0001's GPU is node-0000's old one.
		moved := synth("r2", t0.Add(time.Hour), 2, 1, 1, func(h, g int) string { return uuidOf(0, g) })
		acc, notes, err := st.Acceptance(ctx, moved, "fp")
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, a := range acc {
			if a.Scope == ScopeGPU && a.UUID == uuidOf(0, 0) && a.Host == "node-0000" {
				found = found || len(a.Figures) > 0
			}
		}
		if !found || !strings.Contains(strings.Join(notes, "\n"), "was on node-0000") {
			t.Fatalf("moved GPU: %+v notes %q", acc, notes)
		}
	})
}

// A pin replaces the first ok run as the acceptance, of one node or of everything a run measured.
func TestPin(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		st := mustOpen(t, h)
		t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
		for i, id := range []string{"r1", "r2"} {
			if _, err := st.Record(ctx, synth(id, t0.Add(time.Duration(i)*time.Hour), 2, 1, 1, uuidOf), "fp", 0); err != nil {
				t.Fatal(err)
			}
		}
		pinned, err := st.Pin(ctx, "r2", "node-0001", "")
		if err != nil || len(pinned) != 2 {
			t.Fatalf("pin: %v %q", err, pinned)
		}
		acc, _, _ := st.Acceptance(ctx, synth("r3", t0.Add(3*time.Hour), 2, 1, 1, uuidOf), "fp")
		got := map[string]string{}
		for _, a := range acc {
			got[a.Scope+" "+a.Host] = fmt.Sprintf("%s pinned=%v", a.RunID, a.Pinned)
		}
		want := map[string]string{"node node-0000": "r1 pinned=false", "gpu node-0000": "r1 pinned=false",
			"node node-0001": "r2 pinned=true", "gpu node-0001": "r2 pinned=true"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after the pin: %v, want %v", got, want)
		}
		if _, err := st.Pin(ctx, "nope", "", ""); err == nil || !strings.Contains(err.Error(), "not in the history") {
			t.Fatalf("pin of an unknown run: %v", err)
		}
	})
}

// Retention drops old runs with everything they measured, but never an acceptance run.
func TestRetentionKeepsAcceptanceRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		st := mustOpen(t, h)
		old := time.Now().Add(-400 * 24 * time.Hour)
		for i, id := range []string{"old-accept", "old-other"} {
			if _, err := st.Record(ctx, synth(id, old.Add(time.Duration(i)*time.Hour), 1, 1, 1, uuidOf), "fp", 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.Record(ctx, synth("new", time.Now(), 1, 1, 1, uuidOf), "fp", 365); err != nil {
			t.Fatal(err)
		}
		runs, err := st.Runs(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if strings.Join(ids, ",") != "new,old-accept" {
			t.Fatalf("after retention: %v, want new,old-accept", ids)
		}
		if n := count(t, st, `SELECT COUNT(*) FROM figures WHERE run_id = ?`, "old-other"); n != 0 {
			t.Fatalf("a dropped run's figures stay: %d", n)
		}
	})
}

// Writers at once lose nothing: several stores open on the same database (as several gpuvet
// processes are), each recording runs at the same time, and every run is there after; the two
// first runs of one node agree on one acceptance.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		const writers, runs = 4, 5
		t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
		var wg sync.WaitGroup
		errs := make(chan error, writers*runs)
		for w := 0; w < writers; w++ {
			st := mustOpen(t, h)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < runs; r++ {
					id := fmt.Sprintf("w%d-r%d", w, r)
					if _, err := st.Record(ctx, synth(id, t0.Add(time.Duration(r)*time.Minute), 3, 8, 1, uuidOf), "fp", 365); err != nil {
						errs <- fmt.Errorf("%s: %v", id, err)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		st := mustOpen(t, h)
		if n := count(t, st, `SELECT COUNT(*) FROM runs`); n != writers*runs {
			t.Fatalf("runs = %d, want %d", n, writers*runs)
		}
		if n := count(t, st, `SELECT COUNT(*) FROM gpus`); n != writers*runs*3*8 {
			t.Fatalf("gpus = %d, want %d", n, writers*runs*3*8)
		}
		if n := count(t, st, `SELECT COUNT(DISTINCT run_id) FROM acceptance WHERE scope = ?`, ScopeNode); n != 1 {
			t.Fatalf("the nodes' acceptance came from %d runs, want one", n)
		}
	})
}

// A node's trend: its runs oldest first, each figure the median over its GPUs; runs under another
// plan are marked.
func TestTrend(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		st := mustOpen(t, h)
		t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
		for i, sp := range []float64{1, 0.95, 0.9} {
			fp := "fp"
			if i == 0 {
				fp = "older-plan"
			}
			if _, err := st.Record(ctx, synth(fmt.Sprintf("r%d", i), t0.Add(time.Duration(i)*time.Hour), 1, 2, sp, uuidOf), fp, 0); err != nil {
				t.Fatal(err)
			}
		}
		pts, err := st.Trend(ctx, "node-0000", "", "fp", 0)
		if err != nil || len(pts) != 3 {
			t.Fatalf("trend: %v %d points", err, len(pts))
		}
		key := "Qwen/Qwen3-8B " + judge.MetricPeakOutputTokS
		if pts[0].RunID != "r0" || !pts[0].Other || pts[1].Other || pts[2].Figures[key] != 150*0.9 || pts[0].Figures["gemm_bf16"] != 780 {
			t.Fatalf("trend points: %+v", pts)
		}
		gp, err := st.Trend(ctx, "", uuidOf(0, 1), "fp", 2)
		if err != nil || len(gp) != 2 || gp[0].RunID != "r1" {
			t.Fatalf("GPU trend, newest 2: %v %+v", err, gp)
		}
	})
}

// The password comes from the environment only: a URL with one is refused, and the store's name
// (which summaries and errors show) never carries it.
func TestPasswordStaysOutOfURLAndName(t *testing.T) {
	h := config.Defaults().History
	h.URL = "postgres://u:secret@127.0.0.1:1/db"
	if _, err := Open(ctx, h); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("a password in the URL: %v", err)
	}
	if p := config.Defaults().History; p.PasswordEnv != "PGPASSWORD" {
		t.Fatalf("password_env default %q", p.PasswordEnv)
	}
	t.Setenv("GPUVET_TEST_SECRET_PW", "s3cr3t-pw")
	h.URL, h.PasswordEnv = "postgres://u@127.0.0.1:1/db?connect_timeout=1", "GPUVET_TEST_SECRET_PW"
	h.Timeout = config.Duration(2 * time.Second)
	_, err := Open(ctx, h)
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pw") || !strings.Contains(err.Error(), "postgres 127.0.0.1:1/db") {
		t.Fatalf("an unreachable server: %v", err)
	}
}

// The fingerprint changes with what is measured (the load, the model, the engine) and not with
// what judges or stands for the hardware (a gate, the simulator's slowdown, an accelerator's gates).
func TestFingerprint(t *testing.T) {
	base := config.Defaults()
	fp := Fingerprint(base)
	if len(fp) != 16 || Fingerprint(config.Defaults()) != fp {
		t.Fatalf("fingerprint %q is not stable", fp)
	}
	same := config.Defaults()
	ttft := 150.0
	same.Gates.TTFTP95Ms, same.Sim.NodeSlowdownPct, same.History.DriftPct = &ttft, 5, 9
	same.Accelerators = map[string]config.Accelerator{"H200": {Gates: config.Gates{TTFTP95Ms: &ttft}}}
	if Fingerprint(same) != fp {
		t.Error("a gate, the simulator's slowdown or the drift margin changed the fingerprint")
	}
	for name, change := range map[string]func(c *config.Config){
		"load":   func(c *config.Config) { c.Load.OutputTokens++ },
		"model":  func(c *config.Config) { c.Models = []string{"Qwen/Qwen3-32B"} },
		"engine": func(c *config.Config) { c.Engine.ExtraArgs = []string{"--enforce-eager"} },
		"health": func(c *config.Config) { c.Health.GEMM = false },
		"accelerator": func(c *config.Config) {
			c.Accelerators = map[string]config.Accelerator{"H200": {Models: []string{"x"}}}
		},
	} {
		c := config.Defaults()
		change(&c)
		if Fingerprint(c) == fp {
			t.Errorf("a different %s kept the fingerprint", name)
		}
	}
}

// Several gpuvets opening a new store at the same moment create its schema once, and none fails
// (on PostgreSQL two concurrent CREATE TABLE IF NOT EXISTS collide unless the migration's lock is
// taken first: a pipeline test caught it).
func TestConcurrentOpenOfANewStore(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := Open(ctx, h)
				if err != nil {
					errs <- err
					return
				}
				st.Close()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := count(t, mustOpen(t, h), `SELECT COUNT(*) FROM schema_version`); n != len(migrations) {
			t.Fatalf("schema_version rows = %d, want %d (one a migration)", n, len(migrations))
		}
	})
}

// An interrupted run is judged too: Prepare reads the acceptance run with the run's context
// already cancelled (bounded by history.timeout instead), as Record writes.
func TestPrepareReadsWhenTheRunWasInterrupted(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		h.Enabled = true
		plan := &config.Plan{Config: config.Config{History: h}}
		t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
		(&Session{}).Record(ctx, synth("r1", t0, 1, 1, 1, uuidOf), plan)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		s := synth("r2", t0.Add(time.Hour), 1, 1, 1, uuidOf)
		(&Session{}).Prepare(cancelled, s, plan)
		if s.History == nil || len(s.History.Acceptance) == 0 || len(s.Caveats) > 0 {
			t.Fatalf("history %+v caveats %q", s.History, s.Caveats)
		}
	})
}

// Each node's and GPU's action (what its findings asked for, issue 50) is recorded with its
// status and shown by its trend; the GPU's status and action are the judge's verdict.
func TestTrendKeepsTheAction(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		st := mustOpen(t, h)
		s := synth("a1", time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC), 1, 2, 1, uuidOf)
		host := &s.Hosts[0]
		host.Status, host.Action = results.StatusFailed, results.ActionResetGPU
		host.GPUs = []results.GPUVerdict{{Index: 0, UUID: uuidOf(0, 0), Status: results.StatusOK},
			{Index: 1, UUID: uuidOf(0, 1), Status: results.StatusFailed, Action: results.ActionResetGPU}}
		if _, err := st.Record(ctx, s, "fp", 0); err != nil {
			t.Fatal(err)
		}
		pts, err := st.Trend(ctx, host.Name, "", "fp", 0)
		if err != nil || len(pts) != 1 || pts[0].Action != results.ActionResetGPU {
			t.Fatalf("node trend: %v %+v", err, pts)
		}
		gp, err := st.Trend(ctx, "", uuidOf(0, 1), "fp", 0)
		if err != nil || len(gp) != 1 || gp[0].Status != results.StatusFailed || gp[0].Action != results.ActionResetGPU {
			t.Fatalf("GPU trend: %v %+v", err, gp)
		}
		if ok, _ := st.Trend(ctx, "", uuidOf(0, 0), "fp", 0); len(ok) != 1 || ok[0].Action != "" || ok[0].Status != results.StatusOK {
			t.Fatalf("the healthy GPU: %+v", ok)
		}
	})
}

// Issue 51: a pin of a node or GPU that was not ok in that run says so (only an ok run claims the
// acceptance by itself, docs/history.md); the ok one of the same run pins without a word.
func TestPinSaysARunWasNotOK(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		st := mustOpen(t, h)
		s := synth("bad1", time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC), 1, 2, 1, uuidOf)
		host := &s.Hosts[0]
		host.Status = results.StatusInconclusive
		host.GPUs = []results.GPUVerdict{{Index: 0, UUID: uuidOf(0, 0), Status: results.StatusOK},
			{Index: 1, UUID: uuidOf(0, 1), Status: results.StatusInconclusive}}
		if _, err := st.Record(ctx, s, "fp", 0); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Pin(ctx, "bad1", host.Name, ""); err != nil || len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), "it was inconclusive in that run, not ok") {
			t.Errorf("pin of an inconclusive node: %v %q", err, got)
		}
		if got, err := st.Pin(ctx, "bad1", "", uuidOf(0, 0)); err != nil || len(got) != 1 || strings.Contains(got[0], "not ok") {
			t.Errorf("pin of the ok GPU of that run: %v %q", err, got)
		}
	})
}

// Issue 55: from three earlier ok (or inconclusive) runs on, a node's and each of its GPUs'
// acceptance carries those runs' figures, newest first, the run itself left out; a flagged run is
// not among them; with two there are none (the judge weighs three or more).
func TestAcceptanceCarriesTheNodesEarlierRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		st := mustOpen(t, h)
		t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
		record := func(id string, i int, status results.Status) {
			s := synth(id, t0.Add(time.Duration(i)*time.Hour), 1, 2, 1, uuidOf)
			s.Hosts[0].Status = status
			if _, err := st.Record(ctx, s, "fp", 0); err != nil {
				t.Fatal(err)
			}
		}
		record("r1", 1, results.StatusOK)
		record("r2", 2, results.StatusInconclusive)
		cur := synth("rx", t0.Add(9*time.Hour), 1, 2, 1, uuidOf)
		if acc, _, err := st.Acceptance(ctx, cur, "fp"); err != nil || len(acc) == 0 || acc[0].Earlier != nil {
			t.Fatalf("two earlier runs: %v %+v", err, acc)
		}
		record("r3", 3, results.StatusFlag)
		record("r4", 4, results.StatusOK)
		acc, _, err := st.Acceptance(ctx, cur, "fp")
		if err != nil || len(acc) != 3 {
			t.Fatalf("%v %+v", err, acc)
		}
		for _, a := range acc {
			var ids []string
			for _, r := range a.Earlier {
				ids = append(ids, r.RunID)
				if len(r.Figures) == 0 {
					t.Errorf("%s %s: run %s without figures", a.Scope, a.UUID, r.RunID)
				}
				for _, f := range r.Figures {
					if a.Scope == ScopeGPU && f.UUID != a.UUID {
						t.Errorf("gpu %s: a figure of %s", a.UUID, f.UUID)
					}
				}
			}
			if strings.Join(ids, ",") != "r4,r2,r1" {
				t.Errorf("%s %s: earlier runs %v, want r4, r2, r1 (the flagged r3 left out)", a.Scope, a.UUID, ids)
			}
		}
	})
}

// Issue 53: a run opened (and migrated) its store twice, once to read before the judge and once to
// write after it. A Session opens it once for both, and Record closes it.
func TestSessionOpensTheStoreOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, h config.History) {
		h.Enabled = true
		plan := &config.Plan{Config: config.Config{History: h}}
		t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
		(&Session{}).Record(ctx, synth("r1", t0, 1, 1, 1, uuidOf), plan)
		before := opens.Load()
		se := &Session{}
		s := synth("r2", t0.Add(time.Hour), 1, 1, 1, uuidOf)
		se.Prepare(ctx, s, plan)
		se.Record(ctx, s, plan)
		if n := opens.Load() - before; n != 1 || s.History.Recorded == nil || len(s.History.Acceptance) == 0 || len(s.Caveats) > 0 {
			t.Fatalf("%d opens for one run (want 1); history %+v caveats %q", n, s.History, s.Caveats)
		}
		if se.st != nil {
			t.Error("Record left the store open")
		}
		// A Deps used for a second run uses its Session again: the store reopens.
		s3 := synth("r3", t0.Add(2*time.Hour), 1, 1, 1, uuidOf)
		se.Prepare(ctx, s3, plan)
		se.Close()
		if s3.History == nil || len(s3.History.Acceptance) == 0 || len(s3.Caveats) > 0 {
			t.Fatalf("the session used again: history %+v caveats %q", s3.History, s3.Caveats)
		}
	})
}
