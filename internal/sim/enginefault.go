package sim

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Engine faults the simulator can play on one GPU's engine (FleetConfig.EngineFault "GPU:KIND"),
// protocol faults of the engine, never of the GPU, so the rule naming a failure's layer has an
// end-to-end test:
//   - short: a request ends early with finish_reason "stop" although it asked for ignore_eos;
//   - cut: a stream ends mid-way without a finish reason or [DONE];
//   - traceback: HTTP 500 whose body is a Python traceback (a server's unhandled exception);
//   - exit: the engine process exits at its EngineExitAt-th request (open streams are cut);
//   - hub: the engine cannot fetch its model from the hub (a node cut off from it) and exits
//     before it is ready, saying so as transformers does: the infrastructure's, not the engine's.
//
// The first three touch one request in engineFaultEvery from request engineFaultFrom on
// (readiness and warm-up pass).
const (
	EngineShort     = "short"
	EngineCut       = "cut"
	EngineTraceback = "traceback"
	EngineExit      = "exit"
	EngineHub       = "hub"

	engineFaultFrom  = 8
	engineFaultEvery = 5
	// EngineExitAt is past the synchronous rung of a short sweep (readiness, warm-up and about 35
	// requests), so the exit falls in the throughput probe, with rungs measured before it.
	EngineExitAt = 50
)

// EngineFaultKinds lists the kinds, for help and validation.
var EngineFaultKinds = []string{EngineShort, EngineCut, EngineTraceback, EngineExit, EngineHub}

// ParseEngineFault reads "GPU:KIND" ("" is none) for a fleet of count GPUs (config validates with it).
func ParseEngineFault(s string, count int) (gpu int, kind string, err error) {
	f, err := parseGPUKind("engine fault", s, count, EngineFaultKinds, "1:short")
	return f.gpu, f.kind, err
}

// EngineFault is the fault GPU i's engine plays ("": none).
func (f *Fleet) EngineFault(i int) string {
	if f.engineFault.gpu == i {
		return f.engineFault.kind
	}
	return ""
}

// engineLog is the simulated engine's own log: what a real engine writes when it fails.
type engineLog struct {
	mu     sync.Mutex
	lines  []string
	exited string
}

func (l *engineLog) add(lines ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, lines...)
	if len(l.lines) > 200 {
		l.lines = l.lines[len(l.lines)-200:]
	}
}

// LogTail is the end of the engine's log (n lines at most).
func (s *Server) LogTail(n int) string {
	s.elog.mu.Lock()
	defer s.elog.mu.Unlock()
	return strings.Join(s.elog.lines[max(0, len(s.elog.lines)-n):], "\n")
}

// ExitStatus says how the simulated engine process ended ("exit status 1"); "" while it serves.
func (s *Server) ExitStatus() string {
	s.elog.mu.Lock()
	defer s.elog.mu.Unlock()
	return s.elog.exited
}

// failToFetch plays the hub fault: the engine logs what transformers raises on a node that cannot
// reach the hub and has no cached copy, and exits before it serves.
func (s *Server) failToFetch() {
	s.elog.add("Traceback (most recent call last):",
		"  File \"/usr/lib/python3/dist-packages/transformers/utils/hub.py\", line 470, in cached_files",
		fmt.Sprintf("OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files and it looks like %s is not the path to a directory containing a file named config.json. (simulated engine fault)", s.cfg.Model))
	s.elog.mu.Lock()
	s.elog.exited = "exit status 1"
	s.elog.mu.Unlock()
}

// traceback is what a Python server answers and logs for an unhandled exception.
func traceback(n uint64) string {
	return fmt.Sprintf("Traceback (most recent call last):\n"+
		"  File \"/usr/lib/python3/dist-packages/vllm/entrypoints/openai/serving_chat.py\", line 412, in chat_completion_stream_generator\n"+
		"    output = res.outputs[i]\n"+
		"IndexError: list index out of range (simulated engine fault, request %d)", n)
}

// playEngineFault applies the server's engine fault to request n planned as p. It returns true
// when it answered the request itself (the traceback), and may change p (short, cut).
func (s *Server) playEngineFault(w http.ResponseWriter, n uint64, p *plan) bool {
	kind := s.cfg.EngineFault
	if kind == "" || n < engineFaultFrom {
		return false
	}
	if kind == EngineExit {
		if n == EngineExitAt {
			s.elog.add(traceback(n), "RuntimeError: Engine core died unexpectedly (simulated engine fault): the process exits")
			s.elog.mu.Lock()
			s.elog.exited = "exit status 1"
			s.elog.mu.Unlock()
			go s.hs.Close() // the process is gone: the port closes, open streams are cut
		}
		return false
	}
	if n%engineFaultEvery != 0 {
		return false
	}
	switch kind {
	case EngineTraceback:
		tb := traceback(n)
		s.elog.add("ERROR: Exception in ASGI application", tb)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(tb + "\n"))
		return true
	case EngineShort:
		p.out, p.finish = max(1, p.out/4), "stop" // whatever ignore_eos asked
	case EngineCut:
		if p.out > 1 {
			p.fault.cutAt = 1 + p.out/2
		}
	}
	return false
}
