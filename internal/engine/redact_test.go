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
