package sim

import (
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"time"
)

// The engine in virtual time, for the calibration and validation tests: no command runs a
// workload without HTTP, so this harness is the tests' alone.

// Workload is a closed-loop load: Concurrency clients, each sending its next request the moment
// its previous one ends, Requests in all, every one with the same prompt and output length. With
// Rate > 0 it is open-loop instead: one request every 1/Rate seconds, whatever is in flight.
type Workload struct {
	Concurrency int
	Prompt      int
	Output      int
	Requests    int
	Rate        float64 // requests per second (open loop); 0: closed loop
	// Poisson draws open-loop arrivals from a Poisson process at Rate (seeded, repeatable), as
	// vLLM's and SGLang's benchmark clients do; false spaces them evenly.
	Poisson bool
	Chat    bool // chat completions (the chat template is rendered) rather than completions
	// Offline drives the engine in-process, as vLLM's LLM class (benchmark_latency) does: no
	// frontend, so no entry or exit cost.
	Offline bool
}

// VirtualResult is what a client would have measured, in the engine's virtual time.
type VirtualResult struct {
	TTFT, ITL, E2E []time.Duration // per request (ITL: pooled gaps)
	Duration       time.Duration   // first send to last token
	OutputTokens   int
	Preemptions    int64
	MaxWaiting     int
}

// OutputTokS is output tokens per second over the run.
func (r VirtualResult) OutputTokS() float64 { return float64(r.OutputTokens) / r.Duration.Seconds() }

// Percentile returns the p-th percentile (0..100) of ds by nearest rank.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(k, len(s)-1))]
}

// RunVirtual drives a fresh engine on perf with w in virtual time: the same Engine.Step the HTTP
// server runs in wall time, with no sleeping, so a minute of serving takes milliseconds and is exactly
// repeatable. A request enters the engine Perf.Entry after it is sent and each token leaves
// Perf.Exit after its step ends, as behind HTTP; its TTFT counts from the send.
func RunVirtual(perf *Perf, w Workload) VirtualResult {
	e := NewEngine(perf)
	entry, exit := perf.Entry(w.Prompt, w.Chat), perf.Exit()
	if w.Offline {
		entry, exit = 0, 0
	}
	type pending struct {
		at  time.Duration
		seq *Seq
	}
	type track struct {
		sent, last time.Duration
	}
	var (
		now     time.Duration
		queue   []pending // arrivals not yet in the engine, in time order
		tracks  = map[*Seq]*track{}
		res     VirtualResult
		sent    int
		nextID  uint64
		lastTok time.Duration
	)
	send := func(at time.Duration) {
		if sent >= w.Requests {
			return
		}
		sent++
		nextID++
		// A prompt of its own (the sources' random or distinct prompts): its blocks share nothing,
		// but a preempted request finds its own again while they are cached.
		s := &Seq{ID: nextID, Prompt: w.Prompt, MaxOut: w.Output, Blocks: uniqueBlocks(nextID, w.Prompt/perf.Cfg.BlockSize)}
		tracks[s] = &track{sent: at}
		queue = append(queue, pending{at + entry, s})
	}
	if w.Rate > 0 {
		rng := rand.New(rand.NewPCG(1, 2))
		var at float64
		for i := range w.Requests {
			if w.Poisson {
				at += rng.ExpFloat64() / w.Rate
			} else {
				at = float64(i) / w.Rate
			}
			send(time.Duration(at * 1e9))
		}
	} else {
		for range min(w.Concurrency, w.Requests) {
			send(0)
		}
	}
	for len(res.E2E) < w.Requests {
		// Requests that reached the engine by now join before the next step.
		for len(queue) > 0 && queue[0].at <= now {
			e.Add(queue[0].seq)
			queue = queue[1:]
		}
		if e.Idle() {
			if len(queue) == 0 {
				break
			}
			now = queue[0].at
			continue
		}
		d, emitted, finished := e.Step()
		now += d
		res.MaxWaiting = max(res.MaxWaiting, e.Waiting())
		out := now + exit // when this step's tokens reach the client
		for _, s := range emitted {
			t := tracks[s]
			if s.generated == 1 {
				res.TTFT = append(res.TTFT, out-t.sent)
			} else {
				res.ITL = append(res.ITL, out-t.last)
			}
			t.last = out
			res.OutputTokens++
			lastTok = out
		}
		for _, s := range finished {
			res.E2E = append(res.E2E, out-tracks[s].sent)
			delete(tracks, s)
			if w.Rate == 0 {
				send(out)
			}
		}
	}
	res.Duration = lastTok
	res.Preemptions = e.Preemptions
	return res
}

// uniqueBlocks are n block hashes no other sequence's share: those of a prompt of its own, id.
func uniqueBlocks(id uint64, n int) []uint64 {
	out := make([]uint64, n)
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], id)
	h.Write(b[:])
	for k := range out {
		h.Write([]byte{byte(k)})
		out[k] = h.Sum64()
	}
	return out
}
