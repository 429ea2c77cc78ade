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
// The stream here is made late on purpose (every flush takes 30 ms against a 2 ms ITL); whether a
// token within the limit is left uncounted is checked on the meter itself, with set times, because
// on a loaded machine a real stream may really be late.
func TestSimSaysWhenBehindSchedule(t *testing.T) {
	var log syncBuffer
	cfg := Config{Model: "m", TTFT: 5 * time.Millisecond, ITL: 2 * time.Millisecond, Seed: 1, Log: &log}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"model":"m","prompt":"x","max_tokens":40,"ignore_eos":true,"stream":true}`))
	rec := httptest.NewRecorder()
	h.ServeHTTP(slowWriter{rec}, req)
	if !strings.Contains(rec.Body.String(), "[DONE]") {
		t.Fatalf("stream did not finish")
	}
	mrec := httptest.NewRecorder()
	h.ServeHTTP(mrec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	metrics, _ := io.ReadAll(mrec.Body)
	late := s.lag.late.Load()
	s.close()
	if late == 0 || !strings.Contains(log.String(), "behind schedule") {
		t.Errorf("%d late tokens, log %q", late, log.String())
	}
	if !strings.Contains(string(metrics), "gpuvet_sim:tokens_behind_schedule_total") || !strings.Contains(string(metrics), "gpuvet_sim:schedule_lag_max_seconds") {
		t.Errorf("/metrics lacks the lag figures")
	}
	if strings.Contains(string(metrics), "gpuvet_sim:tokens_behind_schedule_total{engine=\"0\",model_name=\"m\"} 0\n") {
		t.Errorf("/metrics says no token was late")
	}
}

// A token counts as late only past LagLimit, and the log says so once per period.
func TestLagMeterLimit(t *testing.T) {
	var log syncBuffer
	m := lagMeter{log: &log, name: "m"}
	due := time.Unix(100, 0)
	m.observe(due.Add(LagLimit), due.UnixNano(), 3) // at the limit: on time
	m.observe(due.Add(time.Hour), 0, 3)             // due time unknown: not judged
	if m.late.Load() != 0 || log.String() != "" {
		t.Fatalf("on-time tokens counted late: %d, log %q", m.late.Load(), log.String())
	}
	m.observe(due.Add(LagLimit+time.Millisecond), due.UnixNano(), 2)
	m.observe(due.Add(LagLimit+5*time.Millisecond), due.UnixNano(), 1) // same period: no second line
	if m.late.Load() != 3 || m.maxNs.Load() != int64(LagLimit+5*time.Millisecond) {
		t.Errorf("late %d, max %v; want 3 and %v", m.late.Load(), time.Duration(m.maxNs.Load()), LagLimit+5*time.Millisecond)
	}
	if n := strings.Count(log.String(), "behind schedule"); n != 1 {
		t.Errorf("want one log line in one period, got %d: %q", n, log.String())
	}
}
