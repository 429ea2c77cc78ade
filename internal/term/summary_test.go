package term

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A model that failed before any endpoint (a node whose engines never came up) keeps its error out
// of the table's figure columns: the row says "failed: see below" in NOTE and the failures block
// holds the error's first line, once.
func TestRenderFailedModelErrorNotInFigureColumn(t *testing.T) {
	long := "engines not ready: pod engine-0-0-0: CrashLoopBackOff: container engine restarted once, last exit 2 (Error); last log lines:\n" +
		strings.Repeat("INFO loading shard\n", 10) + "ValueError: no KV cache left " + strings.Repeat("x", 300)
	s := &results.Summary{Hosts: []results.Host{{Name: "node-a", Error: "run: " + long,
		Models: []results.Model{{Model: "Qwen/Qwen3-8B", Status: results.StatusFailed, Error: long}}}}}
	var b bytes.Buffer
	Summary(&b, s)
	out := b.String()
	lines := strings.Split(out, "\n")
	header, row := lines[0], ""
	for _, l := range lines {
		if strings.HasPrefix(l, "Qwen/Qwen3-8B") {
			row = l
		}
	}
	col := strings.Index(header, "SYNC TTFT p95")
	if row == "" || col < 0 {
		t.Fatalf("no row or header:\n%s", out)
	}
	if strings.Contains(row, "engines not ready") || !strings.HasSuffix(strings.TrimSpace(row), "failed: see below") {
		t.Errorf("the row carries the error, or no pointer to it:\n%s", row)
	}
	if len([]rune(row)) > len([]rune(header))+20 {
		t.Errorf("row %d wide for a header of %d:\n%s", len([]rune(row)), len([]rune(header)), row)
	}
	if n := strings.Count(out, "[failed] Qwen/Qwen3-8B: engines not ready: pod engine-0-0-0: CrashLoopBackOff: container engine restarted once, last exit 2 (Error); last log lines: … ValueError: no KV cache left"); n != 1 {
		t.Errorf("the failures block has the model's error %d times, want once:\n%s", n, out)
	}
	if strings.Contains(out, "loading shard") {
		t.Errorf("only the error's first and last lines belong on the terminal:\n%s", out)
	}
}

// A judged summary's findings carry the model's whole error (judge: "MODEL: ERROR"), log lines and
// all: the Findings block keeps each finding to one line, as the failures block of an unjudged one
// does (the first line and the last, where the cause is).
func TestFindingsBlockOneLineEach(t *testing.T) {
	long := "engines not ready: pod engine-0-0-0: CrashLoopBackOff; last log lines:\n" +
		strings.Repeat("INFO loading shard\n", 10) + "ValueError: no KV cache left"
	s := &results.Summary{Hosts: []results.Host{{Name: "node-a",
		Models: []results.Model{{Model: "Qwen/Qwen3-8B", Status: results.StatusFailed, Error: long}}}},
		Findings: []results.Finding{{Layer: results.LayerEngine, Status: results.StatusFailed, Host: "node-a", Subject: "Qwen/Qwen3-8B",
			Check: "judge.engine_fault", Reason: "Qwen/Qwen3-8B: " + long, Action: results.ActionFixEngine}}}
	var b bytes.Buffer
	Summary(&b, s)
	out := b.String()
	if strings.Contains(out, "loading shard") || !strings.Contains(out, "last log lines: … ValueError: no KV cache left") {
		t.Errorf("a finding spills its log lines over the block:\n%s", out)
	}
}
