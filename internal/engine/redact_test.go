package engine

import (
	"bytes"
	"strings"
	"testing"
)

// A token printed on a line longer than 64 KiB, wherever it falls against the cut and however the
// writes are split, never reaches the log.
func TestRedactWriterLongLines(t *testing.T) {
	const tok = "hf_CanaryCanaryCanary0123456789"
	r := NewRedactor([]string{"HF_TOKEN=" + tok, "MY_API_KEY=k3y-value-987654"})
	for _, step := range []int{1 << 10, 4093} {
		flushAt := (redactChunk/step + 1) * step // where a writer that flushed whole buffers cut
		for _, pos := range []int{0, flushAt - 1, flushAt - 12, flushAt - 4<<10 - 5, 2*flushAt - 12} {
			for _, secret := range []string{tok, "k3y-value-987654", "Bearer abcdefghijkl", "hf_" + strings.Repeat("Z", 40)} {
				line := strings.Repeat("x", pos) + " " + secret + " " + strings.Repeat("y", 2*redactChunk) + "\n"
				var out bytes.Buffer
				w := r.Writer(&out)
				for i := 0; i < len(line); i += step {
					w.Write([]byte(line[i:min(i+step, len(line))]))
				}
				w.Close()
				got := out.String()
				leak := strings.TrimPrefix(secret, "Bearer ")
				if strings.Contains(got, leak[len(leak)-8:]) || !strings.Contains(got, "[REDACTED]") {
					t.Fatalf("secret %q at %d, writes of %d: leaked or not redacted", secret, pos, step)
				}
				if n := strings.Count(got, "x") + strings.Count(got, "y"); n != pos+2*redactChunk {
					t.Fatalf("secret %q at %d, writes of %d: %d filler bytes out, want %d", secret, pos, step, n, pos+2*redactChunk)
				}
			}
		}
	}
}

// Wherever a known secret falls in the output and however the writes are split, it never reaches
// the log, and everything else does.
func FuzzRedactWriter(f *testing.F) {
	f.Add("hello", 3, 100, 7)
	f.Add("x", redactChunk-5, 2*redactChunk, 4096)
	f.Fuzz(func(t *testing.T, filler string, pos, length, step int) {
		const secret = "s3cr3t-Canary-Value"
		if strings.ContainsAny(filler, "\n") || strings.Contains(filler, "s3cr3t") || filler == "" {
			return
		}
		pos, length, step = abs(pos)%(2*redactChunk), abs(length)%(2*redactChunk), 16+abs(step)%(8<<10)
		fill := strings.Repeat(filler, length/len(filler)+1)[:length]
		pos = min(pos, len(fill))
		line := fill[:pos] + secret + fill[pos:] + "\n"
		var out bytes.Buffer
		w := NewRedactor([]string{"MY_TOKEN=" + secret}).Writer(&out)
		for i := 0; i < len(line); i += step {
			w.Write([]byte(line[i:min(i+step, len(line))]))
		}
		w.Close()
		if strings.Contains(out.String(), secret) {
			t.Fatalf("secret at %d of a %d-byte line, writes of %d: leaked", pos, len(line), step)
		}
	})
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
