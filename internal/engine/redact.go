package engine

import (
	"bytes"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Redactor removes secrets from text: the values of secret-looking environment variables (names
// containing TOKEN, KEY, SECRET, PASSWORD, CREDENTIAL) and well-known token shapes (hf_…, sk-…,
// Bearer …), so engine logs, command lines and results never carry them.
type Redactor struct {
	values []string
}

var tokenShapes = regexp.MustCompile(`\bhf_[A-Za-z0-9]{16,}|\bsk-[A-Za-z0-9_\-]{16,}|(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}|(?i)((?:token|api[_-]?key|password|secret)\s*[=:]\s*)[^\s"',]{6,}`)

// NewRedactor collects the secret values of environ ("K=V" entries).
func NewRedactor(environ []string) *Redactor {
	r := &Redactor{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && secretName(k) {
			r.Add(v)
		}
	}
	return r
}

// Add redacts one more secret value (ignored when shorter than 6 bytes: too likely to be a word).
func (r *Redactor) Add(v string) {
	if len(v) < 6 {
		return
	}
	r.values = append(r.values, v)
	// Longest first, so a secret that contains another is removed whole.
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
}

func secretName(k string) bool {
	u := strings.ToUpper(k)
	return slices.ContainsFunc([]string{"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"}, func(s string) bool { return strings.Contains(u, s) })
}

// String redacts s.
func (r *Redactor) String(s string) string {
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, "[REDACTED]")
	}
	return tokenShapes.ReplaceAllStringFunc(s, func(m string) string {
		sub := tokenShapes.FindStringSubmatch(m)
		for _, prefix := range sub[1:] {
			if prefix != "" {
				return prefix + "[REDACTED]"
			}
		}
		return "[REDACTED]"
	})
}

// Writer returns a line-buffered writer that redacts each line before writing it to w. Close
// flushes a last partial line.
func (r *Redactor) Writer(w io.Writer) *RedactWriter { return &RedactWriter{r: r, w: w} }

// RedactWriter is the writer Redactor.Writer returns; safe for concurrent use (stdout and stderr
// of a child share one).
type RedactWriter struct {
	mu  sync.Mutex
	r   *Redactor
	w   io.Writer
	buf []byte
}

func (rw *RedactWriter) Write(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	from := len(rw.buf) // only the new bytes can hold a newline: a long line stays linear
	rw.buf = append(rw.buf, p...)
	for {
		i := bytes.IndexByte(rw.buf[from:], '\n')
		if i < 0 {
			break
		}
		i += from
		from = 0
		if _, err := io.WriteString(rw.w, rw.r.String(string(rw.buf[:i+1]))); err != nil {
			return 0, err
		}
		rw.buf = rw.buf[i+1:]
	}
	// A line longer than 64 KiB is written in pieces rather than held forever; the last bytes stay
	// behind, and the cut never falls inside a secret, so a secret across the cut is still redacted.
	if len(rw.buf) > redactChunk {
		c := rw.r.safeCut(rw.buf, len(rw.buf)-rw.r.carry())
		if _, err := io.WriteString(rw.w, rw.r.String(string(rw.buf[:c]))); err != nil {
			return 0, err
		}
		rw.buf = append(rw.buf[:0:0], rw.buf[c:]...)
	}
	return len(p), nil
}

// redactChunk is the longest piece of a line held before part of it is written.
const redactChunk = 64 << 10

// carry is how many bytes of a long line stay held at a cut: more than any secret it knows.
func (r *Redactor) carry() int {
	n := 4 << 10
	for _, v := range r.values {
		n = max(n, 2*len(v))
	}
	return n
}

// safeCut moves the cut c back to the start of any secret (known value or token shape) that
// spans it. A cut that would leave nothing to write is the whole buffer: memory stays bounded.
func (r *Redactor) safeCut(b []byte, c int) int {
	for moved := true; moved && c > 0; {
		moved = false
		back := func(a, e int) {
			if a < c && c < e {
				c, moved = a, true
			}
		}
		for _, v := range r.values {
			for off := 0; ; {
				i := bytes.Index(b[off:], []byte(v))
				if i < 0 {
					break
				}
				back(off+i, off+i+len(v))
				off += i + 1
			}
		}
		for _, m := range tokenShapes.FindAllIndex(b, -1) {
			back(m[0], m[1])
		}
	}
	if c <= 0 {
		return len(b)
	}
	return c
}

// Close writes what is left of the last line.
func (rw *RedactWriter) Close() error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if len(rw.buf) == 0 {
		return nil
	}
	_, err := io.WriteString(rw.w, rw.r.String(string(rw.buf)))
	rw.buf = nil
	return err
}
