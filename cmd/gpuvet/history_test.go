package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/history"
	"github.com/gpuvet/gpuvet/internal/history/historytest"
	"github.com/gpuvet/gpuvet/internal/results"
)

// hostRun is a recorded-looking run of one node with one GPU whose BF16 GEMM measured gemm.
func hostRun(id string, at time.Time, node string, gemm float64) *results.Summary {
	g := results.GPUInfo{Index: 0, Name: "NVIDIA H200", UUID: "GPU-cli-0", Serial: "SN-cli-0"}
	return &results.Summary{SchemaVersion: results.SchemaVersion, RunID: id, StartedAt: at, Complete: true, Backend: "local", Status: results.StatusOK,
		Hosts: []results.Host{{Name: node, Status: results.StatusOK, Discovery: results.Discovery{GPUs: []results.GPUInfo{g}},
			Health: &results.Health{Status: results.StatusOK, GPUs: []results.GPUHealth{{GPU: g, Status: results.StatusOK,
				Bench: []results.Microbench{{Name: "gemm_bf16", Value: gemm, Unit: "TFLOP/s", Status: results.StatusOK}}}}}}}}
}

// gpuvet history lists the runs, shows a node's trend, pins an acceptance run and exports CSV and
// JSON, on both stores; a store that cannot be opened, or a pin of an unknown run, is bad input
// (exit 2; the message goes to the process's stderr).
func TestHistoryCommand(t *testing.T) {
	for _, k := range historytest.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			h := k.Fresh(t)
			st, err := history.Open(context.Background(), h)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
			for i, gemm := range []float64{786, 747, 707} {
				if _, err := st.Record(context.Background(), hostRun([]string{"run-a", "run-b", "run-c"}[i], t0.Add(time.Duration(i)*24*time.Hour), "node-7", gemm), "fp", 0); err != nil {
					t.Fatal(err)
				}
			}
			st.Close()
			sets := []string{}
			for _, s := range historytest.Sets(h) {
				sets = append(sets, "--set", s)
			}
			cli := func(args ...string) (int, string) {
				return runCLI(t, append(append([]string{"history"}, args...), sets...)...)
			}

			code, out := cli("runs")
			// Issue 51: each run names its nodes.
			if code != 0 || !strings.Contains(out, "run-c") || strings.Index(out, "run-c") > strings.Index(out, "run-a") || !strings.Contains(out, "node-7") {
				t.Fatalf("runs: exit %d\n%s", code, out)
			}
			code, out = cli("trend", "--node", "node-7")
			if code != 0 || !strings.Contains(out, "gemm_bf16") || !strings.Contains(out, "707") || strings.Index(out, "run-a") > strings.Index(out, "run-c") {
				t.Fatalf("trend: exit %d\n%s", code, out)
			}
			if code, out = cli("trend"); code != 2 {
				t.Fatalf("trend without a subject: exit %d\n%s", code, out)
			}
			// Issue 51: a node or GPU the store never saw is bad input, named, not "(no runs)" and 0.
			for _, subject := range [][]string{{"--node", "nosuch"}, {"--gpu", "GPU-nosuch"}} {
				if code, out = cli(append([]string{"trend"}, subject...)...); code != 2 {
					t.Fatalf("trend %v: exit %d\n%s", subject, code, out)
				}
			}
			if code, out = cli("pin", "run-b", "--node", "node-7"); code != 0 || !strings.Contains(out, "pinned node node-7: acceptance run run-b") {
				t.Fatalf("pin: exit %d\n%s", code, out)
			}
			if code, out = cli("pin", "run-zzz"); code != 2 {
				t.Fatalf("pin of an unknown run: exit %d\n%s", code, out)
			}
			dir := t.TempDir()
			csvPath, jsonPath := filepath.Join(dir, "h.csv"), filepath.Join(dir, "h.json")
			if code, out = cli("export", "--gpu", "GPU-cli-0", "-o", csvPath); code != 0 {
				t.Fatalf("export csv: exit %d\n%s", code, out)
			}
			f, _ := os.Open(csvPath)
			recs, err := csv.NewReader(f).ReadAll()
			f.Close()
			if err != nil || len(recs) != 4 || recs[0][6] != "metric" || recs[3][0] != "run-c" || recs[3][8] != "707" {
				t.Fatalf("csv: %v %q", err, recs)
			}
			if code, out = cli("export", "--node", "node-7", "--format", "json", "-o", jsonPath); code != 0 {
				t.Fatalf("export json: exit %d\n%s", code, out)
			}
			var rows []history.Row
			b, _ := os.ReadFile(jsonPath)
			if err := json.Unmarshal(b, &rows); err != nil || len(rows) != 3 || rows[0].Metric != "gemm_bf16" || rows[0].Value != 786 {
				t.Fatalf("json: %v %+v", err, rows)
			}
			if code, out = cli("export", "--format", "xml"); code != 2 {
				t.Fatalf("export --format xml: exit %d\n%s", code, out)
			}
		})
	}
	if code, out := runCLI(t, "history", "runs", "--set", "history.url=sqlite:///proc/nope/history.db"); code != 2 {
		t.Fatalf("an unusable store: exit %d\n%s", code, out)
	}
}

// Issue 51: a run whose history cannot be written ends exit 1 (the README's "a result that could
// not be written after it was measured"), and its last line says that, not only "run status ok".
func TestRunWithAnUnwritableHistoryExits1AndSaysWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "bad.db")
	if err := os.WriteFile(db, []byte("this is not a SQLite database, it is a user's file"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"run", "--sim", "--sim-gpus", "1", "--out", filepath.Join(dir, "out"),
		"--set", "history.enabled=true", "--set", "history.url=sqlite://" + db}, quickSim...)
	b, err := gpuvet(args...).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1:\n%s", err, b)
	}
	if !strings.Contains(string(b), "was not recorded in the history") {
		t.Errorf("the last line does not say the history was not recorded:\n%s", b)
	}
}
