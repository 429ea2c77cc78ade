//go:build linux

package sim

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/netstamp"
)

// The trace says when each request reached the server's socket, which is when its client wrote it
// and no later than its handler started (the bench's TTFT truth starts there).
func TestTraceReceivedIsKernelTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", probe.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, serr := netstamp.Enable(c)
	c.Close()
	probe.Close()
	if serr != nil {
		t.Skipf("this kernel refuses SO_TIMESTAMPING: %v", serr)
	}
	cfg := fixedCfg()
	cfg.Trace = fh
	s, err := Listen(cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var sent []time.Time
	for range 3 { // the first may lack a stamp: the kernel turns stamping on a moment after it is asked
		sent = append(sent, time.Now())
		streamReq(t, s.URL()+"/v1/completions", map[string]any{"prompt": "when did I arrive", "max_tokens": 2, "ignore_eos": true, "stream": true})
	}
	s.Close()
	b, _ := os.ReadFile(path)
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d trace lines, want 3:\n%s", len(lines), b)
	}
	for i, l := range lines[1:] {
		var rec TraceRecord
		if err := json.Unmarshal(l, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Received.IsZero() {
			t.Fatalf("request %d has no received time: %s", i+2, l)
		}
		if rec.Received.After(rec.Arrival) || rec.Received.Before(sent[i+1]) {
			t.Errorf("request %d: received %v, want between the client's write (%v) and the handler (%v)", i+2, rec.Received, sent[i+1], rec.Arrival)
		}
	}
}
