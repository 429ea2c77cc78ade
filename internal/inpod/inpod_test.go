package inpod

import (
	"bytes"
	"strings"
	"testing"
)

func TestMarkersRoundTrip(t *testing.T) {
	data := bytes.Repeat([]byte(`{"schema_version":"1.0","hosts":[]}`), 3000)
	var log bytes.Buffer
	log.WriteString("progress line\n")
	if err := EmitResult(&log, data); err != nil {
		t.Fatal(err)
	}
	got, err := ExtractResult(log.Bytes())
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("round trip: %v (%d bytes)", err, len(got))
	}
	// As the kubelet's CRI log file holds it: a timestamp and stream on every line.
	var cri bytes.Buffer
	for _, l := range strings.Split(log.String(), "\n") {
		cri.WriteString("2026-01-01T00:00:00Z stdout F " + l + "\n")
	}
	if got, err := ExtractResult(cri.Bytes()); err != nil || !bytes.Equal(got, data) {
		t.Errorf("CRI-prefixed: %v", err)
	}
	if _, err := ExtractResult([]byte("no markers\n")); err != ErrNoResult {
		t.Errorf("no result: %v", err)
	}
	cut := log.String()[:log.Len()/2]
	if _, err := ExtractResult([]byte(cut)); err != ErrNoResult {
		t.Errorf("cut log: %v", err)
	}
	bad := strings.Replace(log.String(), "H4sI", "!!!!", 1)
	if _, err := ExtractResult([]byte(bad)); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged: %v", err)
	}
}

func FuzzExtractResult(f *testing.F) {
	var b bytes.Buffer
	EmitResult(&b, []byte(`{"a":1}`))
	f.Add(b.Bytes())
	f.Add([]byte(markerBegin + "\nAAAA\n" + markerEnd + "\n"))
	f.Fuzz(func(t *testing.T, log []byte) {
		ExtractResult(log) // must not panic or allocate without bound
	})
}
