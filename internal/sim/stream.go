package sim

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// stream writes one request's answer. The SSE path is the hot one: the head is encoded once per
// request, and the tokens found at a wake-up go out in one write and one Flush.
type stream struct {
	s        *Server
	w        http.ResponseWriter
	req      *genRequest
	plan     plan
	seq      *Seq
	arrival  time.Time
	received time.Time // the kernel's receive time of the request (zero: unknown)
	chat     bool

	head  []byte // `{"id":…,"object":…,"created":…,"model":…,"choices":`
	buf   []byte
	times []float64 // send time of each token, ms after arrival
	last  time.Time
}

// apis is what differs between the completions (false) and chat completions (true) endpoints.
var apis = map[bool]struct{ path, id, object, chunk string }{
	false: {"/v1/completions", "cmpl-sim", "text_completion", "text_completion"},
	true:  {"/v1/chat/completions", "chatcmpl-sim", "chat.completion", "chat.completion.chunk"},
}

func (st *stream) id() string { return apis[st.chat].id + strconv.FormatUint(st.plan.n, 10) }

func (st *stream) buildHead() {
	b := append([]byte(nil), `{"id":"`...)
	b = append(b, st.id()...)
	b = append(b, `","object":"`...)
	b = append(b, apis[st.chat].chunk...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, st.s.created, 10)
	b = append(b, `,"model":`...)
	b = append(b, st.s.modelJSON...)
	b = append(b, `,"choices":`...)
	st.head = b
}

func (st *stream) continuous() bool {
	return st.req.StreamOptions != nil && st.req.StreamOptions.ContinuousUsageStats
}

// event appends the start of an SSE event: its data prefix, the head, then choices.
func (st *stream) event(b []byte, choices string) []byte {
	b = append(b, "data: "...)
	b = append(b, st.head...)
	return append(b, choices...)
}

// appendChunk appends the SSE event carrying output token k (1-based).
func (st *stream) appendChunk(b []byte, k int) []byte {
	b = st.event(b, "")
	if st.chat {
		if k <= st.reasoning() {
			b = append(b, `[{"index":0,"delta":{"reasoning_content":"`...)
		} else {
			b = append(b, `[{"index":0,"delta":{"content":"`...)
		}
		b = append(b, outputWords[st.plan.token(k)]...)
		b = append(b, `"},"logprobs":null,"finish_reason":`...)
	} else {
		b = append(b, `[{"index":0,"text":"`...)
		b = append(b, outputWords[st.plan.token(k)]...)
		b = append(b, `","logprobs":null,"finish_reason":`...)
	}
	if k == st.plan.out {
		b = append(b, '"')
		b = append(b, st.plan.finish...)
		b = append(b, `","stop_reason":null}]`...)
	} else if st.chat {
		b = append(b, `null}]`...)
	} else {
		b = append(b, `null,"stop_reason":null}]`...)
	}
	return st.endEvent(b, st.continuous(), k)
}

// endEvent ends an SSE event, with a usage of completion tokens when usage.
func (st *stream) endEvent(b []byte, usage bool, completion int) []byte {
	if usage {
		b = append(b, `,"usage":`...)
		b = appendUsage(b, st.req.promptToks, completion)
	}
	return append(b, "}\n\n"...)
}

// reasoning is how many of a chat answer's first tokens are reasoning (Config.ReasoningTokens),
// never its last, so every answer has output past its reasoning.
func (st *stream) reasoning() int {
	if !st.chat {
		return 0
	}
	return min(st.s.cfg.ReasoningTokens, st.plan.out-1)
}

func (st *stream) runStream(ctx context.Context) {
	s := st.s
	st.buildHead()
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	st.w.WriteHeader(http.StatusOK)
	fl, _ := st.w.(http.Flusher)
	flush := func() {
		st.w.Write(st.buf)
		if fl != nil {
			fl.Flush()
		}
		st.buf = st.buf[:0]
	}
	st.buf = make([]byte, 0, 4096)
	st.times = make([]float64, 0, min(st.plan.out, 256))
	if st.chat {
		// vLLM opens a chat stream with the assistant role and no content (TTFT does not count it).
		st.buf = st.event(st.buf, `[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`)
		st.buf = st.endEvent(st.buf, st.continuous(), 0)
		flush()
	}
	f := st.plan.fault
	sent := 0
	// A plain receive is cheaper than a select per token: a client that goes away pokes Notify.
	stopWatch := context.AfterFunc(ctx, func() { notify(st.seq) })
	defer stopWatch()
	for sent < st.plan.out {
		<-st.seq.Notify
		if ctx.Err() != nil {
			st.abort(f.upTo(sent, "client_gone"))
			return
		}
		due := st.seq.Due.Swap(0)
		g := int(st.seq.Generated.Load())
		now := time.Now()
		s.lag.observe(now, due, g-sent)
		for sent < g {
			sent++
			if sent == f.stallAt {
				flush()
				t := time.NewTimer(f.stall)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
				}
				now = time.Now()
			}
			if sent == f.malformedAt {
				st.buf = st.event(st.buf, `[{"index":0,"delta":{"cont`)
				st.buf = append(st.buf, "\n\n"...)
			}
			if sent == f.cutAt {
				flush()
				st.abort(f.upTo(sent, ""))
				panic(http.ErrAbortHandler) // closes the connection without ending the chunked body
			}
			st.buf = st.appendChunk(st.buf, sent)
			st.mark(now)
		}
		flush()
	}
	if st.req.StreamOptions != nil && st.req.StreamOptions.IncludeUsage {
		st.buf = st.endEvent(st.event(st.buf, `[]`), true, st.plan.out)
	}
	st.buf = append(st.buf, "data: [DONE]\n\n"...)
	flush()
	st.finishTrace(200, f.name())
	s.metrics.success(st.plan.finish, time.Since(st.arrival))
}

// mark records that the next token left at now (trace and latency histograms).
func (st *stream) mark(now time.Time) {
	st.times = append(st.times, float64(now.Sub(st.arrival).Nanoseconds())/1e6)
	if len(st.times) == 1 {
		st.s.metrics.ttft.observe(now.Sub(st.arrival).Seconds())
	} else {
		st.s.metrics.itl.observe(now.Sub(st.last).Seconds())
	}
	st.last = now
}

// runWhole answers a non-streaming request once its last token is out.
func (st *stream) runWhole(ctx context.Context) {
	s := st.s
	for !st.seq.Done.Load() {
		select {
		case <-st.seq.Notify:
		case <-ctx.Done():
			st.abort("client_gone")
			return
		}
	}
	if f := st.plan.fault; f.stall > 0 && f.stallAt > 0 {
		time.Sleep(f.stall)
	}
	text := make([]byte, 0, st.plan.out*4)
	ids := make([]int, 0, st.plan.out)
	for k := 1; k <= st.plan.out; k++ {
		ids = append(ids, st.plan.token(k))
		text = append(text, outputWords[ids[k-1]]...)
	}
	usage := map[string]any{"prompt_tokens": st.req.promptToks, "total_tokens": st.req.promptToks + st.plan.out,
		"completion_tokens": st.plan.out, "prompt_tokens_details": nil}
	var choice map[string]any
	if st.chat {
		choice = map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": string(text),
			"reasoning_content": nil, "tool_calls": []any{}}, "logprobs": nil, "finish_reason": st.plan.finish, "stop_reason": nil}
	} else {
		choice = map[string]any{"index": 0, "text": string(text), "logprobs": nil, "finish_reason": st.plan.finish,
			"stop_reason": nil, "prompt_logprobs": nil}
	}
	if st.req.ReturnTokenIDs {
		choice["token_ids"] = ids // vLLM's return_token_ids (0.10.2+): the output's token ids
	}
	now := time.Now()
	for range st.plan.out {
		st.mark(now)
	}
	writeJSON(st.w, 200, map[string]any{"id": st.id(), "object": apis[st.chat].object, "created": s.created, "model": s.cfg.Model,
		"choices": []any{choice}, "usage": usage, "system_fingerprint": nil})
	st.finishTrace(200, st.plan.fault.name())
	s.metrics.success(st.plan.finish, time.Since(st.arrival))
}

// abort ends a request its client left or its fault cut, the trace naming fault.
func (st *stream) abort(fault string) {
	st.s.drv.abort(st.seq)
	st.finishTrace(200, fault)
	st.s.metrics.aborted()
}

func (st *stream) finishTrace(status int, fault string) {
	if st.s.trace == nil {
		return
	}
	st.s.trace.write(TraceRecord{ID: st.plan.n, Server: st.s.name, Endpoint: apis[st.chat].path, Stream: st.req.Stream, Arrival: st.arrival, Received: st.received,
		PromptTokens: st.req.promptToks, CompletionTokens: len(st.times), MaxTokens: st.req.maxTokens,
		Planned: st.plan.out, Finish: st.plan.finish, Status: status, Fault: fault, TokenMs: st.times})
}

func (s *Server) traceError(arrival, received time.Time, n uint64, chat bool, req *genRequest, status int, fault string) {
	if s.trace == nil {
		return
	}
	r := TraceRecord{ID: n, Server: s.name, Endpoint: apis[chat].path, Arrival: arrival, Received: received, Status: status, Fault: fault, TokenMs: []float64{}}
	if req != nil { // nil: the request was refused before it could be read
		r.Stream, r.PromptTokens, r.MaxTokens = req.Stream, req.promptToks, req.maxTokens
	}
	s.trace.write(r)
}
