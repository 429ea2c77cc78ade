// Package inpod is the in-pod protocol: how a gpuvet Job hands its result back through its log (the
// JSON between two marker lines, which `gpuvet in-pod` prints and the Kubernetes backend reads), and
// what `gpuvet probe` answers. The command's in-pod subcommands and the Kubernetes backend both
// speak it; it imports nothing of gpuvet's.
package inpod

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// A gpuvet Job hands its result back through its log: the JSON, gzipped and base64-encoded in
// short lines between two marker lines, so log line splitting, other output and a CRI log format
// can never corrupt it.
const (
	markerBegin = "=== gpuvet result begin ==="
	markerEnd   = "=== gpuvet result end ==="
	markerLine  = 4000
)

// maxResult bounds a decoded result (a summary with raw power samples is a few MB at most).
const maxResult = 256 << 20

// EmitResult writes data to w between the markers.
func EmitResult(w io.Writer, data []byte) error {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		return err
	}
	enc := base64.StdEncoding.EncodeToString(z.Bytes())
	var b strings.Builder
	b.WriteString("\n" + markerBegin + "\n")
	for len(enc) > 0 {
		n := min(markerLine, len(enc))
		b.WriteString(enc[:n] + "\n")
		enc = enc[n:]
	}
	b.WriteString(markerEnd + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// ErrNoResult means the log holds no complete result (the Job died before writing it).
var ErrNoResult = errors.New("no gpuvet result in the log")

// ExtractResult finds the last complete result in a log and decodes it. Lines may carry a prefix
// (a CRI "TIMESTAMP stdout F " header): only what follows the last space counts inside the block.
func ExtractResult(log []byte) ([]byte, error) {
	lines := strings.Split(string(log), "\n")
	// last is the index of the last of lines[:n] that ends with marker (-1: none).
	last := func(n int, marker string) int {
		for i := n - 1; i >= 0; i-- {
			if strings.HasSuffix(strings.TrimRight(lines[i], "\r"), marker) {
				return i
			}
		}
		return -1
	}
	end := last(len(lines), markerEnd)
	begin := last(max(end, 0), markerBegin)
	if end < 0 || begin < 0 {
		return nil, ErrNoResult
	}
	var enc strings.Builder
	for _, l := range lines[begin+1 : end] {
		l = strings.TrimRight(l, "\r")
		if i := strings.LastIndexByte(l, ' '); i >= 0 {
			l = l[i+1:]
		}
		enc.WriteString(l)
	}
	z, err := base64.StdEncoding.DecodeString(enc.String())
	if err != nil {
		return nil, fmt.Errorf("gpuvet result in the log is damaged (base64: %w)", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("gpuvet result in the log is damaged (gzip: %w)", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxResult+1))
	if err != nil {
		return nil, fmt.Errorf("gpuvet result in the log is damaged (gzip: %w)", err)
	}
	if len(out) > maxResult {
		return nil, fmt.Errorf("gpuvet result in the log is larger than %d MB", maxResult>>20)
	}
	return out, nil
}

// CompletionCheck is one server's answer to `gpuvet probe`.
type CompletionCheck struct {
	URL     string  `json:"url"`
	Tokens  int     `json:"tokens"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}
