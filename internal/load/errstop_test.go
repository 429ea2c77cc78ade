package load

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A rung whose every request fails ends on its errors, not at its cap: the issue's `gpuvet bench
// --profile concurrency --concurrency 8 --max-duration 5s` against a server answering every request
// with an error ran to load.max_rung_duration waiting for 30 completions that could not come,
// sending 143,555 requests. The test is bounded by what the server sees, not by time: past
// maxSent requests it cancels the load (and fails), so that the old code fails in seconds too.
func TestAllFailingRungEndsOnItsErrors(t *testing.T) {
	const maxSent = 2000
	for _, c := range []struct {
		name  string
		f     *fake
		class string
	}{
		{"HTTP 500", &fake{status: 500}, "http_500"},
		{"cut stream", &fake{cutAfter: 2}, errCut},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.f
			f.model, f.ttft, f.itl, f.usage, f.perChunk = testModel, time.Millisecond, time.Millisecond, "continuous", 1
			s := f.start(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				for ctx.Err() == nil && f.requests.Load() <= maxSent {
					time.Sleep(5 * time.Millisecond)
				}
				cancel()
			}()
			o := opts(s.URL, results.LoadConfig{Profile: "concurrency", Concurrency: 8, MaxDuration: results.Duration(5 * time.Second)})
			l, err := Run(ctx, o)
			sent := f.requests.Load()
			if err == nil || l == nil || len(l.Runs) != 1 {
				t.Fatalf("want the measured load with an error, got %v, %v", l, err)
			}
			r := l.Runs[0]
			t.Logf("%d requests sent; run %+v; ended by %s: %s; sizing %+v", sent, r.Requests, r.EndedBy, r.ErrorStop, r.Sizing)
			if l.Interrupted || sent > maxSent {
				t.Fatalf("%d requests sent to a server that fails every one: the rung did not stop on its errors", sent)
			}
			if r.EndedBy != EndedByErrors || !strings.Contains(r.ErrorStop, "no successful one") || r.Errors[c.class] < errStopMin {
				t.Errorf("ended by %q (%q), errors %v: want it ended by its %s errors", r.EndedBy, r.ErrorStop, r.Errors, c.class)
			}
			if r.Sizing == nil || !r.Sizing.Cut || !strings.Contains(r.Sizing.Reason, "no successful one") {
				t.Errorf("sizing %+v: want the rung cut by its errors, said so", r.Sizing)
			}
			if !strings.Contains(err.Error(), "no successful request") {
				t.Errorf("error %q", err)
			}
		})
	}
}

// TestFailDetailIsOneLineOfText: an error's detail is the server's words (an error body, an in-stream
// error message), and it reaches the terminal (a run's faults, their evidence): a server's escape
// sequences and line breaks must not (an ESC [2J clears the screen; a newline breaks the table).
func TestFailDetailIsOneLineOfText(t *testing.T) {
	c := &client{key: "sk-secret-key-123"}
	rec := &Record{end: 1}
	c.fail(rec, "http_500", "boom\x1b[2J\r\nsecond\tline\x00 \u0085 sk-secret-key-123 \x7f")
	for _, r := range rec.Detail {
		if unicode.IsControl(r) {
			t.Fatalf("detail %q keeps a control character %U", rec.Detail, r)
		}
	}
	if !strings.Contains(rec.Detail, "boom") || !strings.Contains(rec.Detail, "second") || strings.Contains(rec.Detail, "secret") {
		t.Fatalf("detail %q", rec.Detail)
	}
}

// TestPostJSONErrorIsOneLine: a /tokenize or calibration answer's error body reaches the terminal in
// the load's setup error, without its control characters or the key.
func TestPostJSONErrorIsOneLine(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte("bad\x1b]0;owned\x07\ngateway sk-secret-key-123"))
	}))
	defer srv.Close()
	err := postJSON(context.Background(), srv.Client(), srv.URL, "sk-secret-key-123", map[string]int{}, &struct{}{})
	if err == nil || strings.ContainsFunc(err.Error(), unicode.IsControl) || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "gateway") {
		t.Fatalf("error %q", err)
	}
}

// TestPreflightListIsBounded: a server listing thousands of models (or ids with escape sequences)
// makes a preflight error of a few names on one line, not megabytes on the terminal.
func TestPreflightListIsBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"data":[`))
		for i := range 20000 {
			if i > 0 {
				w.Write([]byte(","))
			}
			fmt.Fprintf(w, `{"id":"model-%d\u001b[2J"}`, i)
		}
		w.Write([]byte(`]}`))
	}))
	defer srv.Close()
	err := Preflight(context.Background(), Options{URL: srv.URL, Model: "m"})
	if err == nil || len(err.Error()) > 2000 || strings.ContainsFunc(err.Error(), unicode.IsControl) || !strings.Contains(err.Error(), "model-0") || !strings.Contains(err.Error(), "20000") {
		t.Fatalf("error of %d bytes: %.300q", len(err.Error()), err)
	}
}
