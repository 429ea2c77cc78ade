package sim

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A stream that got a malformed event and was then cut is traced with both faults: the trace
// records every fault a request received, in the order sent, and only those it received.
func TestTraceRecordsEveryFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	cfg := faultCfg(Faults{MalformedRate: 1, CutRate: 1})
	cfg.Trace = fh
	s, err := Listen(cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sawBad := 0
	for range 16 {
		r := streamReq(t, s.URL()+"/v1/completions", streamBody(12))
		for _, e := range r.events {
			if e.bad {
				sawBad++
				break
			}
		}
	}
	s.Close()
	f, _ := os.Open(path)
	defer f.Close()
	traced, both, n := 0, 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec TraceRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		n++
		if !strings.HasSuffix(rec.Fault, "cut_stream") {
			t.Errorf("request %d: fault %q, want it to end with cut_stream", rec.ID, rec.Fault)
		}
		if strings.Contains(rec.Fault, "malformed_chunk") {
			traced++
			if rec.Fault == "malformed_chunk,cut_stream" {
				both++
			}
		}
	}
	if n != 16 || sawBad == 0 || traced != sawBad || both != traced {
		t.Fatalf("%d records; clients saw %d malformed events, the trace has %d (%d with the cut after): want them equal and > 0", n, sawBad, traced, both)
	}
}
