package load

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

// framedEvents frames b with sseFramer in pieces (see splitFeed), ending clean or cut.
func framedEvents(b, cuts []byte, clean bool) ([]string, error) {
	var f sseFramer
	var got []string
	emit := func(d []byte) bool { got = append(got, string(d)); return true }
	for k := 0; len(b) > 0; k++ {
		n := len(b)
		if len(cuts) > 0 {
			n = min(n, int(cuts[k%len(cuts)])+1)
		}
		if !f.feed(b[:n], emit) {
			return got, f.err
		}
		b = b[n:]
	}
	if !f.end(clean, emit) {
		return got, f.err
	}
	return got, nil
}

// readerEvents reads b with sseReader over a body that ends with end (io.EOF or io.ErrUnexpectedEOF).
func readerEvents(b []byte, end error) ([]string, error) {
	s := newSSEReader(io.MultiReader(bytes.NewReader(b), errReader{end}))
	var got []string
	for {
		d, err := s.Next()
		if err != nil {
			if err == end {
				return got, nil
			}
			return got, err
		}
		got = append(got, string(d))
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// FuzzSSEFramerAgainstReader holds the event loop's SSE framer to the net/http reader's sseReader:
// the same events from the same bytes, however they are split into reads, for a body that ends
// cleanly and for one that is cut.
func FuzzSSEFramerAgainstReader(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "data:a\r\ndata: b\r\n\r\n: c\nevent: x\ndata: [DONE]\n\n", "data: tail", "data: x\n\ndata: y\r", "\n\n\ndata\n\n"} {
		f.Add([]byte(s), []byte{2})
	}
	f.Fuzz(func(t *testing.T, b, cuts []byte) {
		for _, end := range []error{io.EOF, io.ErrUnexpectedEOF} {
			want, werr := readerEvents(b, end)
			got, err := framedEvents(b, cuts, end == io.EOF)
			if !slices.Equal(got, want) || (werr == nil) != (err == nil) {
				t.Fatalf("end %v: sseReader %q (%v); framer %q (%v)", end, want, werr, got, err)
			}
		}
	})
}

func TestSSEFramerLongLine(t *testing.T) {
	long := append([]byte("data: "), bytes.Repeat([]byte("x"), maxSSELine)...)
	for _, in := range [][]byte{long, append(long, '\n')} {
		if _, err := framedEvents(in, nil, true); !errors.Is(err, errLineTooLong) {
			t.Errorf("a %d-byte line: %v", len(in), err)
		}
		if _, err := readerEvents(in, io.EOF); !errors.Is(err, errLineTooLong) {
			t.Errorf("sseReader, a %d-byte line: %v", len(in), err)
		}
	}
}

// TestSSEEventTooLong: an event's data lines, each short, that never meet the blank line ending the
// event are bounded like one line: a server streaming "data: x" lines without end must not grow the
// event's buffer without bound (both readers).
func TestSSEEventTooLong(t *testing.T) {
	line := []byte("data: " + string(bytes.Repeat([]byte("x"), 1000)) + "\n")
	n := maxSSELine/1000 + 2 // of 1,000 bytes of data each
	in := bytes.Repeat(line, n)
	if _, err := framedEvents(in, nil, true); !errors.Is(err, errEventTooLong) {
		t.Errorf("framer, %d data lines of one event: %v", n, err)
	}
	if _, err := readerEvents(in, io.EOF); !errors.Is(err, errEventTooLong) {
		t.Errorf("sseReader, %d data lines of one event: %v", n, err)
	}
}
