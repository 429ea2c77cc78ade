package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuvet/gpuvet/internal/catalog"
)

// Config is one simulated serving endpoint: vLLM serving Model on GPU (or TP GPUs), or, in fixed
// mode (TTFT or ITL set), a server with exact latencies and no load effects (doc.go).
type Config struct {
	GPU    string       // catalog key or nvidia-smi name; required unless fixed mode
	Model  string       // served model id: a catalog model, or any name in fixed mode
	Engine EngineConfig // vLLM engine settings (zero: vLLM's defaults)
	// Catalog is where GPU and Model are looked up (nil: the built-in catalog).
	Catalog *catalog.Catalog

	// Fixed mode: first token TTFT after arrival, then one token every ITL, each gap scaled by
	// 1 ± Jitter (uniform, seeded). No queueing, no batching.
	TTFT, ITL time.Duration
	Jitter    float64

	Faults Faults
	// Trace receives the ground truth, one JSON line per finished request (see TraceRecord).
	Trace io.Writer
	// Log receives warnings, e.g. that the simulator fell behind its schedule (nil: none).
	Log  io.Writer
	Seed int64

	Fleet    *Fleet // optional: the virtual GPUs this server runs on
	GPUIndex int    // first GPU of this server's group in Fleet (the group is Engine.TP GPUs)
	// EngineFault is the protocol fault this server's engine plays (EngineFaultKinds; "": none).
	EngineFault string
	// ReasoningTokens makes a reasoning model: the first ReasoningTokens tokens of each streamed chat
	// answer (never its last) come as delta.reasoning_content, as vLLM's reasoning parsers send them.
	ReasoningTokens int
}

// Fixed reports whether c is fixed mode.
func (c Config) Fixed() bool { return c.TTFT > 0 || c.ITL > 0 }

// Server is a running simulated endpoint.
type Server struct {
	cfg       Config
	perf      *Perf // nil in fixed mode
	maxLen    int
	tok       *tokenizer
	drv       driver
	ln        net.Listener
	hs        *http.Server
	readyAt   time.Time
	reqs      atomic.Uint64
	metrics   *metrics
	trace     *traceWriter
	created   int64
	modelJSON string // the served model name, JSON-encoded
	name      string // trace label when several servers share a trace file
	lag       lagMeter
	closeOnce sync.Once
	closeErr  error
	elog      engineLog // the engine's own log (LogTail): what its faults write
}

// NewServer checks cfg and builds the server without listening (Handler serves it).
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Faults.validate(); err != nil {
		return nil, err
	}
	if cfg.ReasoningTokens < 0 {
		return nil, fmt.Errorf("reasoning tokens: must be ≥ 0, got %d", cfg.ReasoningTokens)
	}
	if !(cfg.Jitter >= 0 && cfg.Jitter < 1) { // NaN too
		return nil, fmt.Errorf("jitter: must be in [0, 1), got %v", cfg.Jitter)
	}
	if cfg.TTFT < 0 || cfg.ITL < 0 {
		return nil, fmt.Errorf("ttft/itl: must be ≥ 0, got %v / %v", cfg.TTFT, cfg.ITL)
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, fmt.Errorf("model: required (a model id such as Qwen/Qwen3-8B)")
	}
	now := time.Now()
	s := &Server{cfg: cfg, created: now.Unix(), readyAt: now.Add(cfg.Faults.SlowStart), metrics: newMetrics()}
	s.lag.log, s.lag.name = cfg.Log, cfg.Model
	mj, _ := json.Marshal(cfg.Model)
	s.modelJSON = string(mj)
	speed := 1.0
	if cfg.Fleet != nil {
		tp := max(cfg.Engine.TP, 1)
		if cfg.GPUIndex < 0 || cfg.GPUIndex+tp > cfg.Fleet.Count() {
			return nil, fmt.Errorf("gpu index: GPUs %d–%d do not exist in a fleet of %d", cfg.GPUIndex, cfg.GPUIndex+tp-1, cfg.Fleet.Count())
		}
		for i := cfg.GPUIndex; i < cfg.GPUIndex+tp; i++ {
			speed = min(speed, cfg.Fleet.Speed(i)) // a TP group runs at its slowest GPU's pace
		}
		if cfg.GPU == "" {
			cfg.GPU = cfg.Fleet.GPU().Key
			s.cfg.GPU = cfg.GPU
		}
	}
	m, known := cfg.Catalog.LookupModel(cfg.Model)
	if cfg.Fixed() {
		if !known {
			m = catalog.Model{ID: cfg.Model, Vocab: 151936, MaxContext: 32768}
		}
		s.maxLen = m.MaxContext
		if cfg.Engine.MaxModelLen > 0 {
			s.maxLen = cfg.Engine.MaxModelLen
		}
		s.cfg.TTFT, s.cfg.ITL = time.Duration(float64(cfg.TTFT)/speed), time.Duration(float64(cfg.ITL)/speed)
		s.drv = newFixed(s.cfg.TTFT, s.cfg.ITL, cfg.Jitter, cfg.Seed)
	} else {
		g, err := lookupGPU(cfg.Catalog, cfg.GPU)
		if err != nil {
			return nil, err
		}
		if !known {
			return nil, fmt.Errorf("model: unknown model %q; known: %s (or add it with a catalog file, or use fixed mode --ttft/--itl for any name)", cfg.Model, strings.Join(cfg.Catalog.ModelIDs(), ", "))
		}
		if f := cfg.Fleet; f != nil {
			g.MemoryGiB *= f.VisibleMemory(cfg.GPUIndex) // a GPU whose memory is partly hidden from its engine
		}
		p, err := NewPerf(g, m, cfg.Engine)
		if err != nil {
			return nil, err
		}
		p.Speed = speed
		s.perf, s.maxLen = p, p.Cfg.MaxModelLen
		var onStep func(time.Duration)
		if f := cfg.Fleet; f != nil {
			first, n := cfg.GPUIndex, p.Cfg.TP
			p.Slowdown = func() float64 {
				sp := 1.0
				for i := first; i < first+n; i++ {
					sp = min(sp, f.ThrottleSpeed(i))
				}
				return sp * f.EngineDrift() // the group's slowest GPU, under the engine's drift
			}
			onStep = func(d time.Duration) { f.update(first, n, func(g *vgpu) { g.busy += d }) }
			// vLLM reserves gpu_memory_utilization of every GPU at start, whatever the load.
			used := int64(g.MemoryGiB * 1024 * p.Cfg.GPUMemUtil)
			f.update(first, n, func(g *vgpu) { g.usedMiB = used })
		}
		s.drv = newRealtime(NewEngine(p), onStep)
	}
	s.tok = newTokenizer(max(m.Vocab, 1))
	if cfg.Trace != nil {
		s.trace = newTraceWriter(cfg.Trace)
	}
	return s, nil
}

// Listen builds the server and serves it on addr ("127.0.0.1:0" picks a free port).
func Listen(cfg Config, addr string) (*Server, error) {
	s, err := NewServer(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.drv.close()
		return nil, fmt.Errorf("listen on %s: %w (is the port in use? pick another with --port)", addr, err)
	}
	s.ln = ln
	s.hs = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }}
	if cfg.EngineFault == EngineHub {
		s.failToFetch()
		ln.Close() // the process is gone before it listened for long: connections are refused
		return s, nil
	}
	go s.hs.Serve(stampListener{ln})
	return s, nil
}

// URL is the base URL ("http://127.0.0.1:PORT"); the OpenAI base is URL()+"/v1".
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Addr is the listening address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops serving (open streams are cut) and flushes the trace. Calling it again is a no-op.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	var err error
	if s.hs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if e := s.hs.Shutdown(ctx); e != nil {
			err = s.hs.Close()
		}
	}
	s.drv.close()
	if f := s.cfg.Fleet; f != nil && s.perf != nil {
		f.update(s.cfg.GPUIndex, s.perf.Cfg.TP, func(g *vgpu) { g.usedMiB = 0 })
	}
	if s.trace != nil {
		if e := s.trace.flush(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// Handler serves the vLLM OpenAI-compatible API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.generate(w, r, false) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.generate(w, r, true) })
	mux.HandleFunc("POST /tokenize", s.answer(s.tokenize))
	mux.HandleFunc("POST /detokenize", s.answer(s.detokenize))
	mux.HandleFunc("GET /metrics", s.metricsHandler)
	mux.HandleFunc("GET /sim/gpus", s.fleetHandler)
	mux.HandleFunc("GET /sim/sample", s.fleetHandler)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"}) // FastAPI's shape, as vLLM answers
	})
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, 200, map[string]string{"version": "0.17.1+gpuvet.sim"})
	})
	return s.ready(mux)
}

// ready answers 503 to everything during a slow start, as an engine that is still loading.
func (s *Server) ready(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if time.Now().Before(s.readyAt) {
			writeErr(w, &apiError{Status: 503, Type: "ServiceUnavailableError",
				Message: fmt.Sprintf("the engine is still starting (ready in %v)", time.Until(s.readyAt).Round(time.Millisecond))})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]any{"object": "list", "data": []any{map[string]any{
		"id": s.cfg.Model, "object": "model", "created": s.created, "owned_by": "vllm", "root": s.cfg.Model,
		"parent": nil, "max_model_len": s.maxLen,
		"permission": []any{map[string]any{"id": "modelperm-sim", "object": "model_permission", "created": s.created,
			"allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true, "allow_search_indices": false,
			"allow_view": true, "allow_fine_tuning": false, "organization": "*", "group": nil, "is_blocking": false}},
	}}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeErr(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(e.body())
}

// checkModel answers 404 for a model this server does not serve (empty: the served one, as vLLM).
func (s *Server) checkModel(name string) *apiError {
	if name == "" || name == s.cfg.Model {
		return nil
	}
	return &apiError{Status: 404, Type: "NotFoundError", Param: "model", Message: fmt.Sprintf("The model `%s` does not exist.", name)}
}

const maxBody = 32 << 20

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return nil, badRequest("", "request body: %v (limit %d MiB)", err, maxBody>>20)
	}
	return b, nil
}

// answer serves fn's answer to the request's body as JSON, or its error.
func (s *Server) answer(fn func(body []byte) (any, *apiError)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, e := readBody(w, r)
		var v any
		if e == nil {
			v, e = fn(body)
		}
		if e != nil {
			writeErr(w, e)
			return
		}
		writeJSON(w, 200, v)
	}
}

func (s *Server) tokenize(body []byte) (any, *apiError) {
	model, text, e := parseTokenizeRequest(body)
	if me := s.checkModel(model); me != nil {
		return nil, me
	}
	if e != nil {
		return nil, e
	}
	ids := s.tok.Tokenize(text)
	return map[string]any{"count": len(ids), "max_model_len": s.maxLen, "tokens": ids, "token_strs": nil}, nil
}

func (s *Server) detokenize(body []byte) (any, *apiError) {
	var req struct {
		Model  string `json:"model"`
		Tokens []int  `json:"tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, badRequest("tokens", "request body: %v; send {\"tokens\": [ids…]}", err)
	}
	if e := s.checkModel(req.Model); e != nil {
		return nil, e
	}
	text, err := s.tok.Detokenize(req.Tokens)
	if err != nil {
		return nil, badRequest("tokens", "%v", err)
	}
	return map[string]any{"prompt": text}, nil
}

// plan is everything decided about a request before it runs: its output and its faults.
type plan struct {
	n        uint64
	out      int    // output tokens
	finish   string // "length" or "stop"
	wordSeed uint64 // picks the output words
	fault    faultPlan
	// drift: the server runs on a corrupt GPU (FleetConfig.Corrupt): from token CorruptDrift on, its
	// words are not the ones a healthy GPU gives the same request.
	drift bool
}

// decide fixes a request's output length, text and faults from its content and the server seed.
func (s *Server) decide(req *genRequest, n uint64) plan {
	rng := rand.New(rand.NewPCG(uint64(s.cfg.Seed), n))
	h := fnv.New64a()
	h.Write([]byte(req.promptText))
	fmt.Fprintf(h, "/%d", req.promptToks)
	promptHash := h.Sum64()
	p := plan{n: n}
	switch {
	case req.Seed != nil:
		p.wordSeed = promptHash ^ uint64(*req.Seed)*0x9e3779b97f4a7c15
	case req.temperature == 0:
		p.wordSeed = promptHash // greedy: the same prompt gives the same text
	default:
		p.wordSeed = rng.Uint64()
	}
	// The "natural" length at which the model would emit EOS: 64–511 tokens, from the text.
	natural := 64 + int(p.wordSeed%448)
	p.out, p.finish = req.maxTokens, "length"
	if !req.IgnoreEOS && natural < req.maxTokens && req.MinTokens < req.maxTokens {
		// min_tokens holds the EOS back; at max_tokens the engine stops on the length.
		p.out, p.finish = max(natural, req.MinTokens), "stop"
	}
	p.fault = s.cfg.Faults.plan(rng, p.out)
	p.drift = s.cfg.Fleet != nil && s.cfg.Fleet.Corrupt(s.cfg.GPUIndex)
	return p
}

// wordIndex is the id of output token k (1-based): its index in outputWords.
func wordIndex(seed uint64, k int) int {
	x := seed + uint64(k)*0x9e3779b97f4a7c15
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return int(x % uint64(len(outputWords)))
}

// token is the id of output token k (1-based) of the planned request, a corrupt GPU's drifting from
// position CorruptDrift (from 0) on.
func (p plan) token(k int) int {
	if p.drift && k > CorruptDrift {
		return wordIndex(p.wordSeed^0x5bd1e995, k)
	}
	return wordIndex(p.wordSeed, k)
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	arrival := time.Now()
	received := requestReceived(r, arrival)
	n := s.reqs.Add(1)
	body, e := readBody(w, r)
	var req *genRequest
	if e == nil {
		req, e = parseGenRequest(body, chat, s.maxLen)
	}
	if e == nil {
		e = s.checkModel(req.Model)
	}
	if e != nil {
		s.traceError(arrival, received, n, chat, req, e.Status, "")
		writeErr(w, e)
		return
	}
	p := s.decide(req, n)
	if s.playEngineFault(w, n, &p) {
		s.traceError(arrival, received, n, chat, req, http.StatusInternalServerError, "engine_traceback")
		return
	}
	if fe := p.fault.httpError(); fe != nil {
		s.traceError(arrival, received, n, chat, req, fe.Status, p.fault.name())
		writeErr(w, fe)
		return
	}
	seq := &Seq{ID: n, Prompt: req.promptToks, MaxOut: p.out, Chat: chat, Received: arrival, Notify: make(chan struct{}, 1)}
	if s.perf != nil && !s.perf.Cfg.NoPrefixCache {
		seq.Blocks = blockHashes(req.promptText, s.perf.Cfg.BlockSize)
	}
	if s.cfg.Fleet != nil && s.cfg.Fixed() {
		s.cfg.Fleet.update(s.cfg.GPUIndex, 1, func(g *vgpu) { g.active++ })
		defer s.cfg.Fleet.update(s.cfg.GPUIndex, 1, func(g *vgpu) { g.active-- })
	}
	s.metrics.start(req.promptToks)
	s.drv.add(seq)
	st := &stream{s: s, w: w, req: req, plan: p, seq: seq, arrival: arrival, received: received, chat: chat}
	if req.Stream {
		st.runStream(r.Context())
	} else {
		st.runWhole(r.Context())
	}
}

// appendUsage appends a usage object.
func appendUsage(b []byte, prompt, completion int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	return append(b, '}')
}
