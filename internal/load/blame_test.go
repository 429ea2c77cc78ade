package load

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// pausable is a listener with a one-slot accept backlog whose Accept can be held: while held, the
// kernel queue fills and further connection attempts wait on SYN retransmits, as when a server has
// run out of file descriptors.
type pausable struct {
	net.Listener
	held atomic.Bool
}

func (p *pausable) Accept() (net.Conn, error) {
	for p.held.Load() {
		time.Sleep(2 * time.Millisecond)
	}
	return p.Listener.Accept()
}

func tinyBacklogListener(t *testing.T) net.Listener {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// A server that stops accepting connections mid-run delays requests; that delay is the server's,
// so the client is not client-limited and the run says the server was refusing.
func TestServerRefusingIsNotClientLag(t *testing.T) {
	if testing.Short() {
		t.Skip("waits on SYN retransmits")
	}
	f := &fake{model: testModel, ttft: 2 * time.Millisecond, itl: 100 * time.Microsecond, usage: "final"}
	pl := &pausable{Listener: tinyBacklogListener(t)}
	var completions atomic.Int64
	mux := http.NewServeMux()
	inner := f.start(t).Config.Handler
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close") // every request dials
		if strings.HasSuffix(r.URL.Path, "/completions") && completions.Add(1) == 30 {
			pl.held.Store(true)
			time.AfterFunc(1500*time.Millisecond, func() { pl.held.Store(false) })
		}
		inner.ServeHTTP(w, r)
	}))
	s := &httptest.Server{Listener: pl, Config: &http.Server{Handler: mux}}
	s.Start()
	t.Cleanup(s.Close)

	l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: "constant", Rate: 60, MaxDuration: results.Duration(3 * time.Second), OutputTokens: 4}))
	if err != nil {
		t.Fatal(err)
	}
	r := l.Runs[0]
	if !r.ServerRefusing || !strings.Contains(r.ServerReason, "SERVER REFUSING") {
		t.Errorf("server_refusing %v (%q), want the server blamed", r.ServerRefusing, r.ServerReason)
	}
	// Held connections wait a SYN retransmit (1 s): that must not show as client lag. (On this
	// machine a loaded CPU may still make the client lag by tens of ms: that lag is real.)
	if r.ClientLag.Max >= 500 || l.Client.LagMaxMs >= 500 {
		t.Errorf("client lag max %.0f ms (load %.0f ms): the server's accept counted as client lag", r.ClientLag.Max, l.Client.LagMaxMs)
	}
}

// A server that sends whole answers at once (a simulator behind its schedule, a buffering proxy)
// is said to send token timing in bursts; one that paces its tokens is not.
func TestTokenBurstsAreSaid(t *testing.T) {
	for _, tc := range []struct {
		itl    time.Duration
		bursty bool
	}{{0, true}, {10 * time.Millisecond, false}} {
		f := &fake{model: testModel, ttft: time.Millisecond, itl: tc.itl, usage: "final"}
		s := f.start(t)
		l, err := Run(context.Background(), opts(s.URL, results.LoadConfig{Profile: "synchronous", MaxRequests: 8, OutputTokens: 30}))
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Runs[0].TokenBursts; (got != "") != tc.bursty || (tc.bursty && !strings.Contains(got, "bursts")) {
			t.Errorf("itl %v: token_bursts %q, want bursty=%v", tc.itl, got, tc.bursty)
		}
	}
}

// A read that carried several tokens has them spaced over its span, so their gaps can look like a
// steady stream; they still count as bursts, so a server or proxy that buffers is still said.
func TestSpacedReadsStillCountAsBursts(t *testing.T) {
	rec := func(joint bool) *Record {
		r := &Record{marks: make([]mark, 300)}
		for i := range r.marks {
			r.marks[i] = mark{at: time.Duration(i) * time.Millisecond, tok: 1, joint: joint && i%10 != 0}
		}
		return r
	}
	if got := burstCheck(&rungOut{recs: []*Record{rec(true)}}); !strings.Contains(got, "bursts") {
		t.Errorf("tokens that came ten to a read, spaced 1 ms apart: %q", got)
	}
	if got := burstCheck(&rungOut{recs: []*Record{rec(false)}}); got != "" {
		t.Errorf("tokens 1 ms apart, each in its own read: %q", got)
	}
}
