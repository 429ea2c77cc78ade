// Package load is gpuvet's load generator: it drives an OpenAI-compatible endpoint with streamed chat or
// completion requests under a profile (synchronous, concurrency, throughput, constant, poisson, sweep)
// and measures it by gpuvet's measurement rules (docs/architecture.md, "Measurement rules"):
//
//   - TTFT: from the moment the request is written to the first SSE chunk carrying generated content
//     (a role-only chunk does not count). Open-loop profiles also give TTFT from the scheduled send.
//   - ITL: gaps between successive content chunks, pooled over requests; a chunk carrying k tokens
//     contributes k gaps of gap/k. Tokens per chunk come from usage (continuous_usage_stats when the
//     server sends it, else include_usage's total); Load.OutputCounts says which.
//   - TPOT: (E2E − TTFT) / (output tokens − 1) per request. E2E: written -> end of stream.
//   - Throughput (output tok/s, total tok/s, req/s) over the measured window only: warm-up excluded,
//     the tail drained outside it. Sustained req/s = peak output tok/s ÷ mean output tokens/request.
//
// The client checks itself (lag behind schedule, own CPU) and marks client-limited runs loudly.
package load

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuvet/gpuvet/internal/analysis"
	"github.com/gpuvet/gpuvet/internal/dataset"
	"github.com/gpuvet/gpuvet/internal/metrics"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Options is one load against one endpoint.
type Options struct {
	URL, Model string
	// APIKeyEnv names the API key's environment variable (default OPENAI_API_KEY); never written.
	APIKeyEnv string
	Config    results.LoadConfig
	SLO       analysis.SLO
	// TokenizerPath is a local tokenizer.json to size synthetic prompts with (--tokenizer): it must
	// load. Empty: CachedTokenizer, else the server's /tokenize, else a fit from usage.prompt_tokens.
	TokenizerPath string
	// CachedTokenizer is the model's cached tokenizer.json (modelcache); one that fails to load is logged.
	CachedTokenizer string
	// RecordsPath, when set, receives one JSON line per request (Record).
	RecordsPath      string
	RetryUnsaturated bool
	ScrapeMetrics    bool
	// Progress receives a progress bar per rung (nil: none).
	Progress io.Writer
	// Log receives a line per phase: calibration, rungs, retry (nil: none).
	Log io.Writer
	// OnRung is called as each rung starts, with its 0-based place (blocks and retries count) and label.
	OnRung func(index int, label string)
	// OnPlan is called as each sweep rung starts, with the rungs planned after it and the time left.
	OnPlan func(rungsAfter int, left time.Duration)
	// RequestTimeout bounds one request (default 10 min); StallTimeout is the most silence allowed
	// inside a stream, whatever the load's pace (default 120 s); Drain bounds each rung's tail after
	// dispatch stops, and the setup before the first rung (default max(30 s, max duration)).
	RequestTimeout, StallTimeout, Drain time.Duration
	// SilenceFloor is the least silence judged stalled or no_answer (default DefaultSilenceFloor).
	SilenceFloor time.Duration
	// MaxInFlight caps open-loop requests in flight (default 4 × max concurrency, at least 1024).
	MaxInFlight int
	// ScrapeEvery is the /metrics interval (default 1 s).
	ScrapeEvery time.Duration
	// MaxNumSeqs is the engine's max_num_seqs (0: unknown): the knee search goes no higher.
	MaxNumSeqs int
	// BeforeBlock, when set, returns when synchronous block (1-based) may start: GPUs line up there.
	BeforeBlock func(ctx context.Context, block int)
}

// Profiles are the accepted values of LoadConfig.Profile.
var Profiles = []string{"sweep", kindSynchronous, kindConcurrency, kindThroughput, kindConstant, kindPoisson, kindTrace}

// Defaults fills unset LoadConfig fields from results.DefaultLoadConfig. Concurrency and Seed are
// left as given: profile concurrency asks for its level explicitly, and 0 is a seed like any other.
func Defaults(c results.LoadConfig) results.LoadConfig {
	d := results.DefaultLoadConfig()
	c.Profile = cmp.Or(c.Profile, d.Profile)
	c.API = cmp.Or(c.API, d.API)
	c.PromptTokens = cmp.Or(c.PromptTokens, d.PromptTokens)
	if c.PromptMin == 0 && c.PromptMax == 0 {
		c.PromptMin, c.PromptMax = c.PromptTokens, c.PromptTokens
		if c.PromptStdev > 0 {
			c.PromptMin, c.PromptMax = 1, c.PromptTokens+10*c.PromptStdev
		}
	}
	c.OutputTokens = cmp.Or(c.OutputTokens, d.OutputTokens)
	c.MaxConcurrency = cmp.Or(c.MaxConcurrency, d.MaxConcurrency)
	c.Rates = cmp.Or(c.Rates, d.Rates)
	if c.MaxDuration == 0 && c.MaxRequests == 0 {
		c.MaxDuration = d.MaxDuration
	}
	c.Warmup = cmp.Or(c.Warmup, d.Warmup)
	c.Data = cmp.Or(c.Data, d.Data)
	c.Reader = cmp.Or(c.Reader, d.Reader)
	c.MinSamples = cmp.Or(c.MinSamples, d.MinSamples)
	c.MaxRungDuration = cmp.Or(c.MaxRungDuration, d.MaxRungDuration)
	c.TimeBudget = cmp.Or(c.TimeBudget, d.TimeBudget)
	return workloadDefaults(c)
}

// Validate checks options before any request: the first failing check's error names the flag.
func Validate(o Options) error {
	c := Defaults(o.Config)
	if err := firstBad(slices.Concat(endpointChecks(o, c), numberChecks(c), boundChecks(o, c))); err != nil {
		return err
	}
	if err := warmupBounded(c); err != nil {
		return err
	}
	if err := validateWorkload(c); err != nil {
		return err
	}
	if err := validateInputs(o, c); err != nil {
		return err
	}
	if need := slots(o, c) + 64; need > 0 {
		return ensureNoFile(uint64(need))
	}
	return nil
}

// check is one rule of Validate's tables: when bad holds, msg is the error.
type check struct {
	bad bool
	msg string
}

// firstBad is the error of the first check that fails (nil: none does).
func firstBad(checks []check) error {
	for _, c := range checks {
		if c.bad {
			return errors.New(c.msg)
		}
	}
	return nil
}

// endpointChecks are the checks of what the load talks to, and how.
func endpointChecks(o Options, c results.LoadConfig) []check {
	u, err := url.Parse(o.URL)
	return []check{
		{o.URL == "", "--url is empty: give the endpoint's base URL, e.g. http://127.0.0.1:8000"},
		{err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "", fmt.Sprintf("--url %q: want http(s)://host:port", results.RedactURLs(o.URL))},
		{o.Model == "", "--model is empty: give the model id the server lists at /v1/models"},
		{!slices.Contains(Profiles, c.Profile), fmt.Sprintf("--profile %q: unknown; want one of %s", c.Profile, strings.Join(Profiles, ", "))},
		{c.API != "chat" && c.API != "completions", fmt.Sprintf("--api %q: want chat or completions", c.API)},
	}
}

// numberChecks are the checks of the profile's numbers: those it needs, and their signs.
func numberChecks(c results.LoadConfig) []check {
	openLoop := c.Profile == kindConstant || c.Profile == kindPoisson
	return []check{
		{c.Profile == kindConcurrency && c.Concurrency < 1, fmt.Sprintf("--concurrency %d: profile concurrency needs --concurrency ≥ 1", c.Concurrency)},
		{c.Concurrency < 0, fmt.Sprintf("--concurrency %d: want ≥ 1", c.Concurrency)},
		{openLoop && !(c.Rate > 0), fmt.Sprintf("--rate %v: profile %s needs a rate > 0 (requests per second)", c.Rate, c.Profile)},
		{c.Rate < 0, fmt.Sprintf("--rate %v: want > 0", c.Rate)},
		{c.MaxConcurrency < 1, fmt.Sprintf("--max-concurrency %d: want ≥ 1", c.MaxConcurrency)},
		{c.Rates < 1 || c.Rates > 100, fmt.Sprintf("--rates %d: want 1..100 sweep rungs", c.Rates)},
		{c.MaxDuration < 0, fmt.Sprintf("--max-duration %v: want > 0", time.Duration(c.MaxDuration))},
		{c.MaxRungDuration < 0, fmt.Sprintf("--max-rung-duration %v: want > 0", time.Duration(c.MaxRungDuration))},
		{c.TimeBudget < 0, fmt.Sprintf("--time-budget %v: want > 0", time.Duration(c.TimeBudget))},
		{c.MinSamples < 0, fmt.Sprintf("min samples %d: want ≥ 1", c.MinSamples)},
		{c.MaxRequests < 0, fmt.Sprintf("--max-requests %d: want ≥ 1 (or 0 for no limit)", c.MaxRequests)},
		{c.OutputTokens < 1, fmt.Sprintf("--output-tokens %d: want ≥ 1", c.OutputTokens)},
		{c.PrefixCount < 0 || c.PrefixTokens < 0, fmt.Sprintf("shared prefix %d×%d: want non-negative", c.PrefixCount, c.PrefixTokens)},
		{c.PrefixTokens > 0 && c.PrefixTokens > c.PromptMin, fmt.Sprintf("prefix tokens %d exceed the shortest prompt (%d tokens)", c.PrefixTokens, c.PromptMin)},
	}
}

// validateInputs loads what the load reads and checks the reader: a bad file is bad input (exit 2).
func validateInputs(o Options, c results.LoadConfig) error {
	if err := (dataset.Lengths{Mean: c.PromptTokens, Stdev: c.PromptStdev, Min: c.PromptMin, Max: c.PromptMax}).Validate(); err != nil {
		return err
	}
	if c.Data != "synthetic" {
		if _, err := dataset.Load(c.Data); err != nil {
			return fmt.Errorf("--data: %w", err)
		}
	}
	if !slices.Contains(Readers, c.Reader) {
		return fmt.Errorf("--reader %q: want one of %s", c.Reader, strings.Join(Readers, ", "))
	}
	if _, _, _, err := pickReader(c.Reader, o.URL); err != nil {
		return err
	}
	_, err := localTokenizer(Options{TokenizerPath: o.TokenizerPath}) // --tokenizer only, and no log
	return err
}

// Input bounds: far beyond any real load, and below where counts and durations would overflow (a
// concurrency of 2^63 wrapped the open-files check negative).
const (
	MaxStreams      = 100_000
	MaxRate         = 1e6 // requests per second
	MaxOutputTokens = 1 << 20
	MaxPromptTokens = 1 << 22
	MaxRequests     = 1_000_000_000
	MaxDuration     = 7 * 24 * time.Hour
)

// boundChecks are the checks of a load's numbers and durations against the bounds above.
func boundChecks(o Options, c results.LoadConfig) []check {
	over := func(d results.Duration) bool { return time.Duration(d) > MaxDuration }
	return []check{
		{c.Concurrency > MaxStreams, fmt.Sprintf("--concurrency %d: want at most %d streams", c.Concurrency, MaxStreams)},
		{c.MaxConcurrency > MaxStreams, fmt.Sprintf("--max-concurrency %d: want at most %d streams", c.MaxConcurrency, MaxStreams)},
		{o.MaxInFlight > MaxStreams, fmt.Sprintf("max in flight %d: want at most %d streams", o.MaxInFlight, MaxStreams)},
		{math.IsNaN(c.Rate) || c.Rate > MaxRate, fmt.Sprintf("--rate %v: want at most %g requests per second", c.Rate, MaxRate)},
		{c.OutputTokens > MaxOutputTokens, fmt.Sprintf("--output-tokens %d: want at most %d", c.OutputTokens, MaxOutputTokens)},
		{max(c.PromptTokens, c.PromptMax, c.PrefixTokens) > MaxPromptTokens, fmt.Sprintf("--prompt-tokens %d (max %d): want at most %d", c.PromptTokens, c.PromptMax, MaxPromptTokens)},
		{c.PrefixCount > MaxRequests, fmt.Sprintf("--prefix-count %d: want at most %d", c.PrefixCount, MaxRequests)},
		{c.MaxRequests > MaxRequests, fmt.Sprintf("--max-requests %d: want at most %d", c.MaxRequests, MaxRequests)},
		{c.MinSamples > MaxRequests, fmt.Sprintf("min samples %d (compare.min_samples): want at most %d", c.MinSamples, MaxRequests)},
		{o.RequestTimeout < 0 || o.RequestTimeout > MaxDuration, fmt.Sprintf("--request-timeout %v: want more than 0 and at most %v", o.RequestTimeout, MaxDuration)},
		{over(c.MaxDuration), fmt.Sprintf("--max-duration %v: want at most %v", time.Duration(c.MaxDuration), MaxDuration)},
		{over(c.TimeBudget), fmt.Sprintf("--time-budget %v: want at most %v", time.Duration(c.TimeBudget), MaxDuration)},
		{over(c.MaxRungDuration), fmt.Sprintf("--max-rung-duration %v: want at most %v", time.Duration(c.MaxRungDuration), MaxDuration)},
	}
}

// warmupBounded checks --warmup's syntax and bounds.
func warmupBounded(c results.LoadConfig) error {
	n, d, err := parseWarmup(c.Warmup)
	if err == nil && (n > MaxRequests || d > MaxDuration) {
		err = fmt.Errorf("--warmup %q: want at most %d requests or %v", c.Warmup, MaxRequests, MaxDuration)
	}
	return err
}

// parseWarmup reads "N" (requests) or a duration like "5s".
func parseWarmup(s string) (int, time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return 0, 0, fmt.Errorf("--warmup %q: want ≥ 0 requests or a duration like 5s", s)
		}
		return n, 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, 0, fmt.Errorf("--warmup %q: want a request count (1) or a duration (5s)", s)
	}
	return 0, d, nil
}

// slots is the most requests the profile can have in flight (each gets its own connection).
func slots(o Options, c results.LoadConfig) int {
	switch c.Profile {
	case kindSynchronous:
		return 1
	case kindConcurrency:
		return c.Concurrency
	case kindThroughput:
		return c.MaxConcurrency
	case kindConstant, kindPoisson:
		return maxInFlight(o, c)
	}
	return max(c.MaxConcurrency, maxInFlight(o, c))
}

func maxInFlight(o Options, c results.LoadConfig) int {
	if o.MaxInFlight > 0 {
		return o.MaxInFlight
	}
	return max(4*c.MaxConcurrency, 1024)
}

// ensureNoFile raises RLIMIT_NOFILE's soft limit to need, so a big run never dies of EMFILE.
func ensureNoFile(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil // cannot tell: let the run try
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max < need {
		return fmt.Errorf("this load needs %d open files (one connection per stream) but the hard limit is %d: raise it (ulimit -Hn, or LimitNOFILE in systemd) or ask for fewer streams", need, lim.Max)
	}
	lim.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("this load needs %d open files; raising the soft limit failed (%w): run ulimit -n %d first", need, err, need)
	}
	return nil
}

// MemoryLimit is the soft Go memory limit a client with streams in flight wants: 64 MiB + 48 KiB per
// stream (the measured cost of a stream with its connection), at least 256 MiB so the GC never works
// hard enough to slow the client. Without one, thousands of streams let garbage from parsed chunks
// pile up to several times the live heap. The program sets it: it knows how many Runs it starts.
func MemoryLimit(streams int) int64 { return max(256<<20, int64(64<<20+streams*48<<10)) }

// Streams is the most requests a Run of o holds in flight at once (what MemoryLimit is sized by).
func Streams(o Options) int { return slots(o, Defaults(o.Config)) }

// Preflight checks that the endpoint answers and lists the model at /v1/models.
func Preflight(ctx context.Context, o Options) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	u := results.JoinURL(o.URL, "/v1/models")
	req, err := newRequest(ctx, http.MethodGet, u, apiKey(o.APIKeyEnv), nil)
	u = results.RedactURLs(u) // what the messages below show
	if err != nil {
		return fmt.Errorf("--url %q: %w", results.RedactURLs(o.URL), err)
	}
	resp, err := (&http.Client{CheckRedirect: noRedirects}).Do(req)
	if err != nil {
		return fmt.Errorf("endpoint %s does not answer: %w (is the server up, and the URL right?)", results.RedactURLs(o.URL), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return fmt.Errorf("GET %s: HTTP %d to %s: redirects are not followed (the API key would go with them); point --url at the server itself", u, resp.StatusCode, results.RedactURLs(redact(cmp.Or(resp.Header.Get("Location"), "(no Location)"), apiKey(o.APIKeyEnv))))
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return fmt.Errorf("GET %s: HTTP %d: set the API key in $%s", u, resp.StatusCode, cmp.Or(o.APIKeyEnv, "OPENAI_API_KEY"))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: not an OpenAI-compatible endpoint?", u, resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&list); err != nil {
		return fmt.Errorf("GET %s: not a model list: %w", u, err)
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID == o.Model {
			return nil
		}
		if len(ids) < maxListedModels {
			ids = append(ids, head([]byte(oneLine(m.ID)), 100))
		}
	}
	listed := strings.Join(ids, ", ")
	if n := len(list.Data); n > len(ids) {
		listed += fmt.Sprintf(" and %d more, %d in all", n-len(ids), n)
	}
	return fmt.Errorf("model %q is not served at %s (it lists: %s): check --model", o.Model, results.RedactURLs(o.URL), listed)
}

// maxListedModels bounds the served models a preflight error names: the server's words, one line.
const maxListedModels = 10

// Run drives the load and returns what it measured (on Ctrl-C, with Interrupted set). Errors before
// any load return a nil Load; later ones the Load too, with Error set. The setup is bounded by the
// drain bound, each rung by its duration and drain. Neither holds the API key, whatever was echoed.
func Run(ctx context.Context, o Options) (*results.Load, error) {
	l, err := run(ctx, o)
	key := apiKey(o.APIKeyEnv)
	if l != nil {
		l.Error = results.RedactURLs(redact(l.Error, key))
	}
	if err != nil {
		if msg := results.RedactURLs(redact(err.Error(), key)); msg != err.Error() {
			err = errors.New(msg)
		}
	}
	return l, err
}

// run is Run before the key is redacted.
func run(ctx context.Context, o Options) (*results.Load, error) {
	if err := Validate(o); err != nil {
		return nil, err
	}
	cfg := Defaults(o.Config)
	o = withOptionDefaults(o, cfg)
	cl, rx, closeClient, err := openClient(o, cfg)
	defer closeClient()
	if err != nil {
		return nil, err
	}
	l := &results.Load{Config: cfg, Model: o.Model, URL: results.RedactURLs(o.URL)}
	src, err := setUp(ctx, o, cfg, cl, l)
	if err != nil {
		return nil, err
	}
	var recW io.Writer
	if o.RecordsPath != "" {
		fh, err := os.Create(o.RecordsPath)
		if err != nil {
			return nil, fmt.Errorf("--records: %w", err)
		}
		defer fh.Close()
		recW = fh
	}
	cl.epoch = time.Now()
	cl.pace.reset()
	l.StartedAt = cl.epoch.UTC()
	sc, stopScrape := startScrape(ctx, o, cl.epoch)
	cpu0, wall0 := cpuTime(), time.Now()

	ex := &executor{o: o, cfg: cfg, rn: &runner{c: cl, src: src, outTokens: cfg.OutputTokens, seed: uint64(cfg.Seed), progress: o.Progress, modelsURL: results.JoinURL(o.URL, "/v1/models")},
		recW: recW, sc: sc}
	if cfg.Workload == WorkloadLongContext {
		ex.modelLen = modelLen(ctx, cl.hc, ex.rn.modelsURL, o.Model, cl.key)
		ex.kvTokens = sc.kvCapacity(ctx)
	}
	att := ex.profile(ctx, 1)
	l.Runs, l.Saturation = att.runs, att.sat
	if cfg.Workload == WorkloadLongContext {
		l.Context = contextSummary(att.runs, slots(o, cfg), cfg.OutputTokens, ex.kvTokens)
	}
	att = ex.retryUnsaturated(ctx, l, att)
	l.Error = att.err
	l.Interrupted = ctx.Err() != nil
	stopScrape()
	if sc != nil {
		sc.last(ctx) // the counters as the load ends, not up to a scrape interval before
		l.Server = sc.result()
		if exp := ex.prefix.rate(); exp != nil && l.Server.PrefixCache != nil {
			l.Server.PrefixCache.Expected = exp
		}
	}
	fillTotals(l, att, ex.allLags, cpuTime()-cpu0, time.Since(wall0))
	if cl.ev != nil {
		cl.ev.close() // its read counts go into rx
	}
	fillRX(l, rx, ex.rxLags)
	l.OutputCounts = ex.countsSource()
	if ex.recErr != nil && l.Error == "" {
		l.Error = "writing records: " + ex.recErr.Error()
	}
	if l.Error != "" {
		return l, errors.New(l.Error)
	}
	return l, nil
}

// openClient makes the load's client and reader (pickReader); call close however it returned.
func openClient(o Options, cfg results.LoadConfig) (*client, *rxStatus, func(), error) {
	chat := cfg.API == "chat"
	path := "/v1/completions"
	if chat {
		path = "/v1/chat/completions"
	}
	rx := &rxStatus{}
	hc := newHTTPClient(slots(o, cfg), rx)
	cl := &client{hc: hc, endpoint: results.JoinURL(o.URL, path), chat: chat, model: o.Model, key: apiKey(o.APIKeyEnv),
		reqTimeout: o.RequestTimeout, stall: o.StallTimeout, floor: o.SilenceFloor, rx: rx}
	closeClient := func() {
		if cl.ev != nil {
			cl.ev.close()
		}
		hc.CloseIdleConnections()
	}
	ep, useLoop, why, err := pickReader(cfg.Reader, cl.endpoint)
	if err != nil {
		return nil, nil, closeClient, err
	}
	if useLoop {
		ev, err := newEvReader(cl, ep, slots(o, cfg))
		if err != nil {
			return nil, nil, closeClient, err
		}
		cl.ev, why = ev, ev.describe()
	}
	rx.reader = why
	return cl, rx, closeClient, nil
}

// setUp makes the load's prompts and negotiates the request's parameters with the server, within
// the drain bound: a server that never answers ends the run here, not at the request timeout.
func setUp(ctx context.Context, o Options, cfg results.LoadConfig, cl *client, l *results.Load) (dataset.Source, error) {
	var local *dataset.Tokenizer
	if cfg.Data == "synthetic" {
		var err error
		if local, err = localTokenizer(o); err != nil {
			return nil, err
		}
	}
	setup, endSetup := context.WithTimeoutCause(ctx, o.Drain, errSetup)
	defer endSetup()
	l.PromptSalt = rand.Uint64() // this load's prompts are its own (dataset.Synthetic.Salt)
	src, counts, err := prompts(setup, cfg, l.PromptSalt, local, &serverCounter{url: results.JoinURL(o.URL, "/tokenize"), model: o.Model, key: cl.key, chat: cl.chat, hc: cl.hc},
		&usageCounter{url: cl.endpoint, model: o.Model, key: cl.key, chat: cl.chat, hc: cl.hc}, o.Log)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotServing, err)
	}
	l.TokenCounts = counts
	// A prompt no rung sends (the load's run from index 0): the engine's prefix cache keeps what
	// it computed, and the first measured request must not find its prompt there.
	if err := cl.negotiate(setup, src.Prompt(negotiatePrompt)); err != nil {
		return nil, err
	}
	if len(cl.dropped) > 0 {
		l.DroppedParams = cl.dropped
		logf(o.Log, "the endpoint refused %s: not sent (output lengths may not be exact; counts are checked per request)", strings.Join(cl.dropped, ", "))
	}
	return src, nil
}

// startScrape scrapes /metrics through the load when asked to (nil: not asked); stop ends it.
func startScrape(ctx context.Context, o Options, epoch time.Time) (sc *scraper, stop func()) {
	if !o.ScrapeMetrics {
		return nil, func() {}
	}
	sc = &scraper{url: results.JoinURL(o.URL, "/metrics"), hc: &http.Client{}, every: o.ScrapeEvery, epoch: epoch}
	sc.res.Source = results.RedactURLs(sc.url)
	scrapeCtx, stopScrape := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sc.loop(scrapeCtx) })
	return sc, func() { stopScrape(); wg.Wait() }
}

// retryUnsaturated reruns an unsaturated sweep once when the budget allows; the better curve stays.
func (ex *executor) retryUnsaturated(ctx context.Context, l *results.Load, att attempt) attempt {
	o := ex.o
	rerun := ex.cfg.Profile == "sweep" && o.RetryUnsaturated && att.sat != nil && att.sat.Unsaturated && ctx.Err() == nil
	if took := ex.rn.c.since(); rerun && took > ex.left() && att.sat.Knee != nil {
		note := fmt.Sprintf("not rerun though unsaturated: a second sweep would take about %v, past the %v left of load.time_budget (%v)", took.Round(time.Second), max(ex.left(), 0).Round(time.Second), time.Duration(ex.cfg.TimeBudget))
		att.sat.Knee.Plan = joinNote(att.sat.Knee.Plan, note)
		logf(o.Log, "sweep plan: %s", note)
		return att
	}
	if !rerun {
		return att
	}
	logf(o.Log, "sweep unsaturated (%s): running it once more, keeping the better curve", att.sat.Reason)
	second := ex.profile(ctx, 2)
	l.Retried, l.KeptAttempt = true, 1
	if second.err == "" && !second.interrupted && peak(second.runs) > peak(att.runs) {
		att, l.KeptAttempt = second, 2
		l.Runs, l.Saturation = att.runs, att.sat
	} else if second.err != "" || second.interrupted {
		logf(o.Log, "retry did not complete (%s): the first sweep is kept", cmp.Or(second.err, "interrupted"))
	}
	return att
}

// negotiatePrompt is the index of the prompt the setup's first request sends.
const negotiatePrompt = 1 << 30

func withOptionDefaults(o Options, cfg results.LoadConfig) Options {
	// max(x, 0) first: a value ≤ 0 takes the default.
	o.RequestTimeout = cmp.Or(max(o.RequestTimeout, 0), 10*time.Minute)
	o.StallTimeout = cmp.Or(max(o.StallTimeout, 0), 120*time.Second)
	o.Drain = cmp.Or(max(o.Drain, 0), max(30*time.Second, time.Duration(cfg.MaxDuration)))
	o.MaxInFlight = maxInFlight(o, cfg)
	o.ScrapeEvery = cmp.Or(max(o.ScrapeEvery, 0), time.Second)
	return o
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		io.WriteString(w, results.RedactURLs(fmt.Sprintf("gpuvet bench: "+format+"\n", args...)))
	}
}

// prompts builds the prompt source and says how its lengths were made exact (calibrated).
func prompts(ctx context.Context, cfg results.LoadConfig, salt uint64, local *dataset.Tokenizer, server, usageC dataset.Counter, log io.Writer) (dataset.Source, string, error) {
	if cfg.Data != "synthetic" {
		f, err := dataset.Load(cfg.Data)
		return f, tokensFile, err
	}
	s := &dataset.Synthetic{Lengths: dataset.Lengths{Mean: cfg.PromptTokens, Stdev: cfg.PromptStdev, Min: cfg.PromptMin, Max: cfg.PromptMax},
		Seed: uint64(cfg.Seed), PrefixCount: cfg.PrefixCount, PrefixTokens: cfg.PrefixTokens, Salt: salt}
	counts, err := calibrated(ctx, s, cfg.API == "chat", local, server, usageC, log)
	if err != nil {
		return nil, "", err
	}
	src, err := withWorkload(cfg, s)
	return src, counts, err
}

// calibrated sizes synthetic prompts by the first counter that works (see prompts) and says which.
func calibrated(ctx context.Context, s *dataset.Synthetic, chat bool, local *dataset.Tokenizer, server, usageC dataset.Counter, log io.Writer) (string, error) {
	if local != nil {
		counts, err := withLocal(ctx, s, chat, local, server, usageC, log)
		if err == nil {
			return counts, nil
		}
		logf(log, "%v; sizing prompts with the server instead", err)
	}
	err := s.Calibrate(ctx, server)
	if err == nil {
		return tokensServer, nil
	}
	logf(log, "exact prompt lengths via /tokenize unavailable (%v); calibrating from usage.prompt_tokens", err)
	if err2 := s.CalibrateLinear(ctx, usageC); err2 != nil {
		return "", fmt.Errorf("cannot size prompts: /tokenize failed (%w) and usage calibration failed (%w)", err, err2)
	}
	return tokensUsage, nil
}

// withLocal calibrates s with a local tokenizer.json, then measures what the server counts beyond it
// (chat template, BOS) by /tokenize, else usage.prompt_tokens. Without either, completions keep the
// post_processor's special tokens and chat prompts are exact in their text only, as the result says.
func withLocal(ctx context.Context, s *dataset.Synthetic, chat bool, local *dataset.Tokenizer, server, usageC dataset.Counter, log io.Writer) (string, error) {
	label := tokensLocal + " (" + local.Path + ")"
	if err := s.Calibrate(ctx, local); err != nil {
		return "", fmt.Errorf("%s: %w", label, err)
	}
	d, err := s.Rebase(ctx, server)
	by := tokensServer
	if err != nil && !errors.Is(err, dataset.ErrMismatch) {
		logf(log, "server /tokenize cannot check the local tokenizer (%v); checking with usage.prompt_tokens", err)
		d, err = s.Rebase(ctx, usageC)
		by = "usage.prompt_tokens"
	}
	switch {
	case errors.Is(err, dataset.ErrMismatch):
		return "", fmt.Errorf("%s is not the served model's tokenizer, by %s: %w", label, by, err)
	case err != nil && chat:
		s.Exact = false
		logf(log, "the server gave no prompt count (%v): chat prompts are sized without the chat template", err)
		return label + "; chat template not counted (the server gave no count)", nil
	case err != nil:
		logf(log, "the server gave no prompt count (%v): trusting the tokenizer.json's special tokens", err)
		return label + "; special tokens from its post_processor, unchecked", nil
	case chat:
		return fmt.Sprintf("%s; chat template %+d tokens by %s", label, d, by), nil
	case d != 0:
		return fmt.Sprintf("%s; %+d special tokens by %s", label, d, by), nil
	}
	return label, nil
}

// localTokenizer loads --tokenizer (an error when it does not load), else the cached tokenizer.json
// when it loads (one this build cannot read, SentencePiece say, is logged), else returns nil.
func localTokenizer(o Options) (*dataset.Tokenizer, error) {
	if o.TokenizerPath != "" {
		t, err := dataset.LoadTokenizer(o.TokenizerPath)
		if err != nil {
			return nil, fmt.Errorf("--tokenizer: %w (give the model's tokenizer.json, or omit the flag to size prompts with the server)", err)
		}
		return t, nil
	}
	if o.CachedTokenizer == "" {
		logf(o.Log, "no tokenizer.json for %s (none given, none in the model cache): sizing prompts with the server", o.Model)
		return nil, nil
	}
	t, err := dataset.LoadTokenizer(o.CachedTokenizer)
	if err != nil {
		logf(o.Log, "the cached %v: sizing prompts with the server", err)
		return nil, nil
	}
	return t, nil
}

// attempt is one pass of the profile (a sweep may run twice).
type attempt struct {
	runs        []results.Run
	sat         *results.Saturation
	err         string
	interrupted bool
	burst       float64 // best 1 s completion rate of any rung
}

// executor runs the configured profile's rungs, writing records as each rung ends.
type executor struct {
	o       Options
	cfg     results.LoadConfig
	rn      *runner
	recW    io.Writer
	recErr  error
	rung    int
	sc      *scraper // nil: /metrics not scraped
	allLags []float64
	lastCPU float64   // the last rung's CPU use, as a share of all cores
	rxLags  []float64 // per request: mean wait of its chunks in the socket (kernel-timed chunks only)
	counts  map[string]int
	// What the earlier sweep rungs measured (plan.go), and the synchronous rung's sustained rate.
	tempo         tempo
	syncRate      float64
	lastProbeTime time.Duration // the last steady probe's time per request
	ahead         []rungSpec    // the rungs planned after the one running (for OnPlan)
	started       int           // rungs (and blocks) started so far (for OnRung)
	// The rungs planned from a measured pace: the time they were planned for, and took (drift).
	plannedFor, took time.Duration
	// blocks are the synchronous blocks run so far (blocks.go); blocksLeft those still to run.
	blocks     []syncBlock
	blocksLeft int
	prefix     prefixExpect // what an ideal prefix cache would hold of what was sent
	// A context ladder's bounds: the model's context length and KV-cache tokens (0: not said).
	modelLen, kvTokens int
}

// spec is the next rung of kind, its index taken.
func (ex *executor) spec(kind string, conc int, rate float64) rungSpec {
	return ex.take(ex.newSpec(kind, conc, rate))
}

// take gives a planned rung the next index.
func (ex *executor) take(s rungSpec) rungSpec {
	s.Index = ex.rung
	ex.rung++
	return s
}

// newSpec is a rung of kind with the profile's settings, its index not yet taken (a plan's).
func (ex *executor) newSpec(kind string, conc int, rate float64) rungSpec {
	warmReqs, warmDur, _ := parseWarmup(ex.cfg.Warmup) // checked by Validate
	s := rungSpec{Kind: kind, Concurrency: conc, Rate: rate,
		Duration: time.Duration(ex.cfg.MaxDuration), MaxRequests: ex.cfg.MaxRequests,
		WarmupReqs: warmReqs, WarmupDur: warmDur, Drain: ex.o.Drain, MaxInFlight: ex.o.MaxInFlight}
	// The rungs whose latency figures are gated are sized by what completes.
	if kind == kindSynchronous || kind == kindConcurrency {
		s.MinSamples, s.Cap = ex.cfg.MinSamples, time.Duration(ex.cfg.MaxRungDuration)
		s.Shorten = kind == kindSynchronous && ex.cfg.Profile == "sweep"
	}
	return s
}

// tail bounds the drain of an ungated sweep rung: its throughput counts tokens streamed inside the
// window, and waiting for a slow engine's requests would double the sweep and measure nothing more.
func (ex *executor) tail(s rungSpec) rungSpec {
	s.Drain = min(s.Drain, max(sweepTail, s.Duration/4))
	return s
}

// RungTime is a sweep rung's planned length after the synchronous one (for progress estimates).
func RungTime(c results.LoadConfig) time.Duration {
	d := time.Duration(Defaults(c).MaxDuration)
	return d + max(sweepTail, d/4)
}

// sweepTail is the least drain a sweep's ungated rung gets.
const sweepTail = 2 * time.Second

// one runs a rung, summarises it, writes its records and frees them.
func (ex *executor) one(ctx context.Context, a *attempt, s rungSpec, n int) results.Run {
	logf(ex.o.Log, "rung %d: %s", s.Index+1, s.label())
	ex.plan(s, ex.ahead) // first: the rung's line says the time left by it
	if ex.o.OnRung != nil {
		ex.o.OnRung(ex.started, s.label())
	}
	ex.started++
	from := ex.rn.c.since()
	out := ex.rn.run(ctx, s)
	ex.record(s, ex.rn.c.since()-from)
	run := summarize(out, &ex.o.SLO, uint64(ex.cfg.Seed))
	run.Workload = ex.rn.src.Describe()
	if tr, ok := ex.rn.src.(*dataset.TraceSource); ok && s.Kind == kindTrace {
		run.Replay = replayOf(out, tr)
	}
	ex.prefix.add(ex.rn.src, out.recs)
	ex.lastCPU = 0
	if out.wall > 0 {
		ex.lastCPU = out.cpu.Seconds() / out.wall.Seconds() / float64(runtime.NumCPU())
	}
	ex.account(out.recs, n)
	if ex.recW != nil && ex.recErr == nil {
		ex.recErr = writeRecords(ex.recW, out.recs)
	}
	a.burst = max(a.burst, burstReqS(out))
	if s.Block > 0 {
		ex.keepBlock(out, run)
	}
	for _, r := range out.recs { // keep the figures, drop the per-chunk data
		r.marks, r.ITLMs = nil, nil
	}
	if s.Block <= 1 { // a later block joins the first (poolBlocks)
		a.runs = append(a.runs, run)
	}
	a.interrupted = a.interrupted || out.interrupted
	if s.Steady && s.Kind == kindThroughput && run.TransientReason() == "" {
		ex.lastProbeTime = ex.reqTime(run)
	}
	return run
}

// account marks the records as attempt n's and adds them to the load-wide tallies.
func (ex *executor) account(recs []*Record, n int) {
	if ex.counts == nil {
		ex.counts = map[string]int{}
	}
	for _, r := range recs {
		r.Attempt = n
		if r.ok() {
			ex.counts[r.Counts]++
		}
		if !r.Warmup && !r.noLag && r.ok() {
			ex.allLags = append(ex.allLags, r.LagMs)
		}
		if !r.Warmup && r.ok() && r.rxN > 0 {
			ex.rxLags = append(ex.rxLags, r.RXLagMs)
		}
	}
}

// probeTime is a request's time at a probe's load: at least alone, and the last steady probe's.
func (ex *executor) probeTime() time.Duration { return max(ex.tempo.alone, ex.lastProbeTime) }

// tempoAt is the tempo with best as the best steady probe.
func (ex *executor) tempoAt(best results.Run) tempo {
	p := ex.tempo
	if best.TransientReason() == "" {
		p.probeReq, p.probeRate, p.probeConc = ex.reqTime(best), ex.rungRate(best), best.Concurrency
	}
	return p
}

// ladderRange is the constant rates' range: the synchronous rate to kneeOvershoot × the best probe's.
func (ex *executor) ladderRange(best results.Run) (lo, hi float64) {
	return ex.syncRate, max(kneeOvershoot*ex.rungRate(best), ex.syncRate)
}

// guess is n rungs of RungTime, at least a request's time alone and a half (an open loop's ramp and
// its flat part): the plan before the probe measured the engine's pace.
func (ex *executor) guess(n int) []rungSpec {
	g := make([]rungSpec, n)
	for i := range g {
		g[i].Expect = max(RungTime(ex.cfg), ex.tempo.alone*3/2+sweepTail)
	}
	return g
}

// aloneTime is a full-length request's time alone: the synchronous mean TTFT and TPOT (shortLen).
func aloneTime(sync results.Run, outTokens int) time.Duration {
	ms := sync.TTFT.Mean + sync.TPOT.Mean*float64(max(outTokens-1, 0))
	return time.Duration(ms * float64(time.Millisecond))
}

// reqTime is a steady closed-loop rung's time per request: concurrency ÷ sustained rate (Little).
func (ex *executor) reqTime(r results.Run) time.Duration {
	rate := ex.rungRate(r)
	if rate <= 0 || r.Concurrency <= 0 {
		return 0
	}
	return time.Duration(float64(r.Concurrency) / rate * float64(time.Second))
}

// profile runs the whole profile once.
func (ex *executor) profile(ctx context.Context, n int) attempt {
	var a attempt
	c := ex.cfg
	switch {
	case c.Workload == WorkloadLongContext:
		ex.contextLadder(ctx, &a, n)
	case slices.Contains(closedLoop, c.Profile):
		ex.one(ctx, &a, ex.spec(c.Profile, slots(ex.o, c), 0), n)
	case c.Profile == kindConstant, c.Profile == kindPoisson:
		ex.one(ctx, &a, ex.spec(c.Profile, 0, c.Rate), n)
	case c.Profile == kindTrace:
		ex.one(ctx, &a, ex.traceSpec(ex.rn.src.(*dataset.TraceSource)), n)
	case c.Profile == "sweep":
		ex.sweep(ctx, &a, n)
	}
	if a.err == "" && !a.interrupted {
		for i, r := range a.runs {
			if c.Profile == "sweep" && i > 0 && r.Requests.Errored == 0 {
				continue // a sweep rung with nothing measured (a starved client) is said by its counts, not an error
			}
			if broken(r) {
				a.err = fmt.Sprintf("%s rung: no successful request (errors: %s)", r.Kind, results.ErrorCounts(r.Errors))
				break
			}
		}
	}
	return a
}

// broken reports a rung whose requests all failed or streamed nothing; one whose requests streamed but
// were still running at its end is over capacity, a finding (Knee.PastKnee), never an error.
func broken(r results.Run) bool {
	return r.Requests.Successful == 0 && (r.Requests.Streamed == 0 || r.Requests.Incomplete == 0)
}

// sweep: synchronous (sized by completions) -> throughput probe (max concurrency), raised to the knee
// (findKnee) -> n constant rungs at sync + (top − sync) × i / n, i = 1..n, then the saturation
// analysis. top = kneeOvershoot × the best probe's rate, so that the top rungs show the plateau; n
// is Rates, or fewer when the time budget says so (ladder). Rates are sustained rates (rungRate).
// Probes and constant rungs are measured in their steady state (steady). Only a rung that measured
// nothing (broken) ends a sweep early.
func (ex *executor) sweep(ctx context.Context, a *attempt, n int) {
	c := ex.cfg
	ex.blocks = nil
	defer ex.poolBlocks(a)
	ss := ex.take(ex.blockSpec(0, 1))
	ex.ahead = ex.guess(1 + c.Rates)
	ex.blocksLeft = SyncBlocks - 1
	ex.beforeBlock(ctx, 1)
	sync := ex.one(ctx, a, ss, n)
	if ctx.Err() != nil {
		return
	}
	if sync.Requests.Successful == 0 {
		a.err = fmt.Sprintf("sweep stopped: the synchronous rung completed no request in %v (errors: %s)", time.Duration(sync.WindowSeconds*float64(time.Second)).Round(time.Second), results.ErrorCounts(sync.Errors))
		return
	}
	ex.tempo = tempo{alone: aloneTime(sync, c.OutputTokens)}
	ex.syncRate = ex.rungRate(sync)
	from := ex.rn.c.since()
	ex.ahead = ex.guess(c.Rates)
	probe := ex.one(ctx, a, ex.take(ex.steady(ex.newSpec(kindThroughput, c.MaxConcurrency, 0), ex.probeTime(), 0)), n)
	if ctx.Err() != nil {
		return
	}
	if broken(probe) {
		a.err = fmt.Sprintf("sweep stopped: the throughput probe neither completed a request nor streamed a token (errors: %s)", results.ErrorCounts(probe.Errors))
		return
	}
	probe, knee := ex.findKnee(ctx, a, n, probe, [2]time.Duration{from, ex.rn.c.since()})
	if ctx.Err() != nil {
		return
	}
	ex.tempo = ex.tempoAt(probe)
	lo, hi := ex.ladderRange(probe)
	knee.LadderTopReqS, knee.LadderFootReqS = hi, lo
	ex.ahead = ex.guess(c.Rates)
	ex.nextBlock(ctx, a, ss.Index, n)
	if ctx.Err() != nil {
		return
	}
	specs, note := ex.ladder(ex.tempo, lo, hi, ex.left())
	knee.PlannedRates, knee.Plan = len(specs), joinNote(knee.Plan, note)
	if note != "" {
		logf(ex.o.Log, "sweep plan: %s", note)
	}
	var outs []float64
	for i := 0; i < len(specs); i++ {
		ex.ahead = specs[i+1:]
		r := ex.one(ctx, a, ex.take(specs[i]), n)
		if ctx.Err() != nil {
			return
		}
		outs = append(outs, r.OutputTokS)
		var why string
		if specs, why = ex.replan(specs, i+1); why != "" {
			knee.Plan = joinNote(knee.Plan, why)
			logf(ex.o.Log, "sweep plan: %s", why)
		}
	}
	knee.PlannedRates = len(specs)
	ex.ahead = nil
	// A ladder whose top still climbs past the probe's peak says the probe under-read, knee or not.
	outs = ex.climb(ctx, a, n, outs, probe, (hi-lo)/float64(len(specs)), knee)
	if ctx.Err() != nil {
		return
	}
	for ex.blocksLeft > 0 && ctx.Err() == nil { // the last, and any middle one a short ladder left
		ex.nextBlock(ctx, a, ss.Index, n)
	}
	if ctx.Err() != nil {
		return
	}
	s := analysis.AnalyzeSaturation(outs, probe.OutputTokS)
	if knee.PastKnee && !s.LowerBound() {
		s.Reason = "saturated: " + knee.Reason
	}
	s.Knee = knee
	a.sat = &s
}

// joinNote joins two notes with "; " ("" when both are empty).
func joinNote(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// rungRate is a rung's sustained request rate, which places the constant rungs: output tok/s ÷ output
// tokens per request (counting completions under-reads a short window, and a ladder placed too low
// looks unsaturated). Per request: the profile's output length when the rung completed none or
// shortened some, else the completed mean. With no tokens: concurrency ÷ mean E2E.
func (ex *executor) rungRate(r results.Run) float64 {
	per := r.MeanOutputTokens
	if r.Requests.Successful == 0 || (r.Sizing != nil && r.Sizing.ShortRequests > 0) || per <= 0 {
		per = float64(ex.cfg.OutputTokens)
	}
	switch {
	case r.OutputTokS > 0 && per > 0:
		return r.OutputTokS / per
	case r.Requests.Successful > 0 && r.E2E.Mean > 0:
		return float64(max(r.Concurrency, 1)) / (r.E2E.Mean / 1000)
	}
	return r.ReqS
}

func peak(runs []results.Run) float64 {
	p := 0.0
	for _, r := range runs {
		p = max(p, r.OutputTokS)
	}
	return p
}

// fillTotals sets the load-wide figures: peak and sustained throughput, burst rate, client check.
func fillTotals(l *results.Load, a attempt, lags []float64, cpu, wall time.Duration) {
	if len(l.Runs) > 0 {
		best := slices.MaxFunc(l.Runs, func(a, b results.Run) int { return cmp.Compare(a.OutputTokS, b.OutputTokS) })
		l.PeakOutputTokS = best.OutputTokS
		m := best.MeanOutputTokens
		if best.Requests.Successful == 0 || m <= 0 {
			m = float64(l.Config.OutputTokens) // none completed: each asked for the profile's length
		}
		if m > 0 {
			l.SustainedReqS = l.PeakOutputTokS / m
		}
	}
	l.BurstReqS = a.burst
	d := metrics.Summarize(lags)
	l.Client = results.ClientCheck{LagP50Ms: d.P50, LagP99Ms: d.P99, LagMaxMs: d.Max, Cores: runtime.NumCPU()}
	if wall > 0 {
		l.Client.CPUPercent = 100 * cpu.Seconds() / wall.Seconds()
	}
	var reasons []string
	for _, r := range l.Runs {
		if r.ClientLimited {
			reasons = append(reasons, fmt.Sprintf("%s rung: %s", r.Kind, r.ClientReason))
		}
	}
	if lim, why := selfCheck(lags, cpu, wall); lim {
		reasons = append(reasons, why)
	}
	if len(reasons) > 0 {
		l.Client.ClientLimited = true
		l.Client.Reason = strings.Join(reasons, "; ")
	}
}

// countsSource is the output-count source used by most successful requests.
func (ex *executor) countsSource() string {
	best, n := "", 0
	for k, v := range ex.counts {
		if v > n || (v == n && k < best) {
			best, n = k, v
		}
	}
	return best
}
