package sim

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowWriter stands for a machine that cannot keep up: every flush takes 30 ms, so the stream's
// tokens pile up behind their 2 ms schedule.
type slowWriter struct{ *httptest.ResponseRecorder }

func (w slowWriter) Flush() {
	w.ResponseRecorder.Flush()
	time.Sleep(30 * time.Millisecond)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// The simulator knows when it falls behind its own schedule: it says so in its log and /metrics.
func TestSimSaysWhenBehindSchedule(t *testing.T) {
	for _, slow := range []bool{false, true} {
		var log syncBuffer
		cfg := Config{Model: "m", TTFT: 5 * time.Millisecond, ITL: 2 * time.Millisecond, Seed: 1, Log: &log}
		s, err := NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := s.Handler()
		req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"model":"m","prompt":"x","max_tokens":40,"ignore_eos":true,"stream":true}`))
		rec := httptest.NewRecorder()
		var w http.ResponseWriter = rec
		if slow {
			w = slowWriter{rec}
		}
		h.ServeHTTP(w, req)
		if !strings.Contains(rec.Body.String(), "[DONE]") {
			t.Fatalf("slow=%v: stream did not finish", slow)
		}
		mrec := httptest.NewRecorder()
		h.ServeHTTP(mrec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		metrics, _ := io.ReadAll(mrec.Body)
		late := s.lag.late.Load()
		s.close()
		hasLog := strings.Contains(log.String(), "behind schedule")
		if slow != (late > 0) || slow != hasLog {
			t.Errorf("slow=%v: %d late tokens, log %q", slow, late, log.String())
		}
		if !strings.Contains(string(metrics), "gpuvet_sim:tokens_behind_schedule_total") || !strings.Contains(string(metrics), "gpuvet_sim:schedule_lag_max_seconds") {
			t.Errorf("/metrics lacks the lag figures")
		}
		if slow && strings.Contains(string(metrics), "gpuvet_sim:tokens_behind_schedule_total{engine=\"0\",model_name=\"m\"} 0\n") {
			t.Errorf("slow: /metrics says no token was late")
		}
	}
}
