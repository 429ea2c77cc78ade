package load

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/enginekind"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Server-side gauges of every engine kind: the first present wins.
var gauges = enginekind.AllGauges()

// scrapedNames are every metric a scrape reads.
var scrapedNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range slices.Concat(gauges.Running, gauges.Waiting, gauges.KVUsage,
		gauges.PrefixQueries, gauges.PrefixHits, gauges.Preemptions) {
		m[n] = true
	}
	return m
}()

// maxServerSamples bounds the kept scrapes (an hour at 1 Hz; past it the older ones are thinned).
const maxServerSamples = 3600

// parseProm sums each wanted metric over its label sets; a malformed line is an error naming it.
func parseProm(r io.Reader, wanted map[string]bool) (map[string]float64, error) {
	out := map[string]float64{}
	sc := lineScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.IndexAny(line, "{ \t")
		if i < 0 {
			return nil, fmt.Errorf("/metrics line %d: %q has no value", n, head([]byte(line), 80))
		}
		name, rest := line[:i], line[i:]
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndexByte(rest, '}')
			if j < 0 {
				return nil, fmt.Errorf("/metrics line %d: unclosed label set in %q", n, head([]byte(line), 80))
			}
			rest = rest[j+1:]
		}
		if !wanted[name] {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("/metrics line %d: %s has no value", n, name)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("/metrics line %d: %s value %q is not a number", n, name, fields[0])
		}
		// NaN and ±Inf are valid exposition, but no count gpuvet reads (and JSON cannot hold them).
		if out[name] += v; math.IsNaN(out[name]) || math.IsInf(out[name], 0) {
			return nil, fmt.Errorf("/metrics line %d: %s value %q is not a finite number (or its sum over label sets overflows)", n, name, fields[0])
		}
	}
	return out, sc.Err()
}

// lineScanner reads r's lines of up to 1 MiB.
func lineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return sc
}

// scraper polls /metrics while the load runs.
type scraper struct {
	url   string
	hc    *http.Client
	every time.Duration
	epoch time.Time

	mu                    sync.Mutex
	res                   results.ServerMetrics
	hasPrefix, hasPreempt bool // the engine exports those counters (as of the last scrape)
}

func pick(vals map[string]float64, names []string) (float64, bool) {
	for _, n := range names {
		if v, ok := vals[n]; ok {
			return v, true
		}
	}
	return 0, false
}

// fetch GETs /metrics (at most 5 s) and hands the answer to read.
func (s *scraper) fetch(ctx context.Context, read func(*http.Response) error) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := get(ctx, s.hc, s.url, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return read(resp)
}

// once takes one sample; an error the first time stops the scraper (the endpoint has no usable /metrics).
func (s *scraper) once(ctx context.Context) error {
	var vals map[string]float64
	err := s.fetch(ctx, func(resp *http.Response) (err error) {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: HTTP %d", results.RedactURLs(s.url), resp.StatusCode)
		}
		vals, err = parseProm(io.LimitReader(resp.Body, 16<<20), scrapedNames)
		return err
	})
	if err != nil {
		return err
	}
	run, ok1 := pick(vals, gauges.Running)
	wait, ok2 := pick(vals, gauges.Waiting)
	kv, ok3 := pick(vals, gauges.KVUsage)
	if !ok1 && !ok2 && !ok3 {
		return fmt.Errorf("GET %s: none of the known engine gauges (e.g. vllm:num_requests_running)", results.RedactURLs(s.url))
	}
	if kv > 1 { // some engines report percent
		kv /= 100
	}
	sample := results.ServerSample{T: time.Since(s.epoch).Seconds(), Running: run, Waiting: wait, KVCacheUsage: kv}
	sample.PrefixQueries, sample.PrefixHits, s.hasPrefix = prefixPair(vals)
	sample.Preemptions, s.hasPreempt = pick(vals, gauges.Preemptions)
	s.mu.Lock()
	if len(s.res.Samples) >= maxServerSamples {
		// Thin to every other one (the first kept: the counters' start), so that they span the
		// whole load and the rungs to come still read their own windows' samples.
		k := (len(s.res.Samples) + 1) / 2
		for i := range k {
			s.res.Samples[i] = s.res.Samples[2*i]
		}
		s.res.Samples = s.res.Samples[:k]
	}
	s.res.Samples = append(s.res.Samples, sample)
	s.mu.Unlock()
	return nil
}

// prefixPair reads the first engine kind's prefix-cache counters with both queries and hits present.
func prefixPair(vals map[string]float64) (queries, hits float64, ok bool) {
	for i, q := range gauges.PrefixQueries {
		qv, ok1 := vals[q]
		hv, ok2 := vals[gauges.PrefixHits[i]]
		if ok1 && ok2 {
			return qv, hv, true
		}
	}
	return 0, 0, false
}

// loop scrapes until ctx ends. A failing first scrape records the error and stops.
func (s *scraper) loop(ctx context.Context) {
	if err := s.once(ctx); err != nil {
		s.mu.Lock()
		s.res.Error = "no usable /metrics: " + err.Error()
		s.mu.Unlock()
		return
	}
	t := time.NewTicker(s.every)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.once(ctx); err != nil && ctx.Err() == nil {
				fails++
				s.mu.Lock()
				s.res.Error = fmt.Sprintf("%d scrapes failed, last: %v", fails, err)
				s.mu.Unlock()
			}
		}
	}
}

// last takes a final sample once the load is over (on Ctrl-C too), when the scrape worked at all.
func (s *scraper) last(ctx context.Context) {
	s.mu.Lock()
	worked := len(s.res.Samples) > 0
	s.mu.Unlock()
	if worked {
		_ = s.once(context.WithoutCancel(ctx))
	}
}

func (s *scraper) result() *results.ServerMetrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.res
	r.Samples = append([]results.ServerSample(nil), s.res.Samples...)
	if n := len(r.Samples); n >= 2 {
		first, last := r.Samples[0], r.Samples[n-1]
		if s.hasPrefix && last.PrefixQueries >= first.PrefixQueries && last.PrefixHits >= first.PrefixHits { // not reset
			// An engine with prefix caching off keeps its counters at zero: a hit rate of 0.
			pc := &results.PrefixCache{QueriedTokens: last.PrefixQueries - first.PrefixQueries, HitTokens: last.PrefixHits - first.PrefixHits}
			if pc.QueriedTokens > 0 {
				pc.HitRate = pc.HitTokens / pc.QueriedTokens
			}
			r.PrefixCache = pc
		}
		if s.hasPreempt {
			p := max(last.Preemptions-first.Preemptions, 0)
			r.Preemptions = &p
		}
	}
	return &r
}

// counterSample is the engine's preemption counter at one moment (ok: it was read).
type counterSample struct {
	ok          bool
	preemptions float64
	at          float64 // seconds since the load's start
}

// counters takes a sample now (a rung's edge) and returns its preemption counter (not ok: none).
func (s *scraper) counters(ctx context.Context) counterSample {
	if s == nil || s.once(ctx) != nil {
		return counterSample{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.res.Samples[len(s.res.Samples)-1]
	return counterSample{ok: s.hasPreempt, preemptions: last.Preemptions, at: last.T}
}

// kvPressure reads the samples between from and to (seconds): the highest KV-cache use they saw,
// and the share of them in which the engine held requests waiting while it ran fewer than streams.
func (s *scraper) kvPressure(from, to float64, streams int) (kvMax, held float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, h := 0, 0
	for _, x := range s.res.Samples {
		if x.T >= from && x.T <= to {
			n++
			kvMax = max(kvMax, x.KVCacheUsage)
			if x.Waiting > 0 && x.Running < float64(streams) {
				h++
			}
		}
	}
	if n > 0 {
		held = float64(h) / float64(n)
	}
	return kvMax, held
}

// kvCapacity is the KV-cache size in tokens from cache-info labels (0: not said).
func (s *scraper) kvCapacity(ctx context.Context) int {
	n := 0
	if s != nil {
		s.fetch(ctx, func(resp *http.Response) error {
			n = parseKVCapacity(io.LimitReader(resp.Body, 16<<20))
			return nil
		})
	}
	return n
}

// parseKVCapacity reads num_gpu_blocks × block_size from a cache-info metric's line of /metrics.
func parseKVCapacity(r io.Reader) int {
	sc := lineScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if !slices.ContainsFunc(gauges.CacheInfo, func(n string) bool { return strings.HasPrefix(line, n+"{") }) {
			continue
		}
		label := func(name string) int {
			i := strings.Index(line, name+`="`)
			if i < 1 || line[i-1] != '{' && line[i-1] != ',' {
				return 0
			}
			rest := line[i+len(name)+2:]
			j := strings.IndexByte(rest, '"')
			if j < 0 {
				return 0
			}
			v, err := strconv.Atoi(rest[:j])
			if err != nil || v < 0 || v > 1<<40 {
				return 0
			}
			return v
		}
		if blocks, bs := label("num_gpu_blocks"), label("block_size"); blocks > 0 && bs > 0 && blocks <= (1<<40)/bs {
			return blocks * bs
		}
	}
	return 0
}
