package modelcache

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpuvet/gpuvet/internal/filelimit"
	"github.com/gpuvet/gpuvet/internal/results"
)

// DefaultEndpoint is the public hub; HF_ENDPOINT or Options.Endpoint replace it.
const DefaultEndpoint = "https://huggingface.co"

// hub talks to a Hugging Face-compatible hub. The token goes only to the hub's own host: a redirect
// to another host (the CDN serving LFS files) is followed without it.
type hub struct {
	endpoint *url.URL
	token    string
	hc       *http.Client
	retry    retryPolicy
	stall    time.Duration // a body that sends nothing for this long is cut and retried
}

// retryPolicy bounds retries of 429, 5xx and cut connections.
type retryPolicy struct {
	attempts      int           // tries per request without progress (progress resets the count)
	base, max     time.Duration // exponential backoff with jitter between base and max
	maxRetryAfter time.Duration // a longer Retry-After is clamped to this
}

var defaultRetry = retryPolicy{attempts: 8, base: 500 * time.Millisecond, max: 30 * time.Second, maxRetryAfter: 5 * time.Minute}

func newHub(endpoint, token string) (*hub, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("hub endpoint %q: expected an http(s) URL like %s", endpoint, DefaultEndpoint)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	hc := &http.Client{
		Transport: tr,
		// Redirects are followed by hand (see do) so the token never leaves the hub's host and the
		// hub's own headers (X-Linked-Etag, X-Repo-Commit) are seen before the CDN answers.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &hub{endpoint: u, token: token, hc: hc, retry: defaultRetry, stall: 2 * time.Minute}, nil
}

// readToken returns the hub token: HF_TOKEN, else the file at HF_TOKEN_PATH, else $HF_HOME/token.
// It never comes from flags, so it never shows in argv.
func readToken() (string, error) {
	if t := strings.TrimSpace(os.Getenv("HF_TOKEN")); t != "" {
		return t, nil
	}
	p := cmp.Or(os.Getenv("HF_TOKEN_PATH"), filepath.Join(hfHome(), "token"))
	b, err := filelimit.Read(p, filelimit.Small, "hub token file")
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read hub token file %s: %w", p, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (h *hub) url(parts ...string) string {
	u := *h.endpoint
	u.Path = h.endpoint.Path + strings.Join(parts, "")
	u.RawPath = ""
	return u.String()
}

// apiModelURL builds {endpoint}/api/models/{model}/{kind}/{rev}; the revision is escaped whole
// (refs/pr/1 -> refs%2Fpr%2F1) as the hub libraries do.
func (h *hub) apiModelURL(model, kind, rev string) string {
	u := *h.endpoint
	u.Path = h.endpoint.Path + "/api/models/" + model + "/" + kind + "/" + rev
	u.RawPath = h.endpoint.Path + "/api/models/" + model + "/" + kind + "/" + url.PathEscape(rev)
	return u.String()
}

func (h *hub) resolveURL(model, commit, path string) string {
	return h.url("/", model, "/resolve/", commit, "/", path)
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// do sends one request, following up to 5 redirects by hand. The Authorization header is sent only
// to the hub endpoint's own scheme+host+port. hubHdr is the last response from the hub's host (for
// a CDN redirect, the 302 that carries X-Linked-Etag/X-Repo-Commit), or resp itself.
func (h *hub) do(ctx context.Context, method, rawURL string, hdr http.Header) (resp *http.Response, hubHdr http.Header, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	for hop := 0; ; hop++ {
		resp, err := h.send(ctx, method, u, hdr)
		if err != nil {
			return nil, nil, err
		}
		if sameOrigin(u, h.endpoint) {
			hubHdr = resp.Header
		}
		if resp.StatusCode < 300 || resp.StatusCode > 399 || resp.StatusCode == http.StatusNotModified {
			return resp, hubHdr, nil
		}
		loc := resp.Header.Get("Location")
		drain(resp)
		if loc == "" {
			return nil, nil, fmt.Errorf("%s %s: redirect %d without a Location header", method, results.RedactURLs(u.String()), resp.StatusCode)
		}
		if hop >= 5 {
			return nil, nil, fmt.Errorf("%s %s: more than 5 redirects", method, results.RedactURLs(rawURL))
		}
		next, err := u.Parse(loc)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: redirect to unparsable Location %q", method, results.RedactURLs(u.String()), loc)
		}
		if next.Scheme != "http" && next.Scheme != "https" {
			return nil, nil, fmt.Errorf("%s %s: redirect to %q is not http(s)", method, results.RedactURLs(u.String()), results.RedactURLs(next.String()))
		}
		u = next
	}
}

// send makes one hub request with hdr: gpuvet's User-Agent, no compression (a Range must address
// the file's bytes, not a gzip stream of them), and the token only for the hub's own origin, so it
// never follows a redirect to a CDN.
func (h *hub) send(ctx context.Context, method string, u *url.URL, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "gpuvet-modelcache")
	req.Header.Set("Accept-Encoding", "identity")
	if h.token != "" && sameOrigin(u, h.endpoint) {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	return h.hc.Do(req)
}

// doNoFollow sends one request to the hub and returns its answer with any redirect to another
// host unfollowed (a HEAD reads the hub's own headers; the CDN is not asked). Relative redirects on
// the hub's host (a renamed repo) that carry no file headers are followed, up to 5.
func (h *hub) doNoFollow(ctx context.Context, method, rawURL string) (*http.Response, http.Header, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	for hop := 0; ; hop++ {
		resp, err := h.send(ctx, method, u, nil)
		if err != nil {
			return nil, nil, err
		}
		if resp.StatusCode < 300 || resp.StatusCode > 399 || resp.Header.Get("X-Linked-Etag") != "" || hop >= 5 {
			return resp, resp.Header, nil
		}
		next, err := u.Parse(resp.Header.Get("Location"))
		if err != nil || !sameOrigin(next, h.endpoint) {
			return resp, resp.Header, nil
		}
		drain(resp)
		u = next
	}
}

func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}

// HubError is a non-success answer from the hub, with the hub's X-Error-Code when it sent one.
type HubError struct {
	Status int
	Code   string // X-Error-Code: GatedRepo, RepoNotFound, RevisionNotFound, EntryNotFound, ...
	What   string // the request in words ("revision main of org/name", "file x of org/name")
	Msg    string // the clear message for the user
}

func (e *HubError) Error() string { return e.Msg }

// retryable statuses: throttling and server-side failures.
func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500
}

// statusError turns a non-2xx hub answer into an error that says what to do.
func (h *hub) statusError(resp *http.Response, model, what string) error {
	code := resp.Header.Get("X-Error-Code")
	hubMsg := strings.TrimSpace(resp.Header.Get("X-Error-Message"))
	if hubMsg == "" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		hubMsg = strings.TrimSpace(string(b))
	}
	if h.token != "" {
		hubMsg = strings.ReplaceAll(hubMsg, h.token, "[token]") // belt and braces: a hub never echoes it
	}
	if len(hubMsg) > 200 {
		hubMsg = hubMsg[:200] + "…"
	}
	e := &HubError{Status: resp.StatusCode, Code: code, What: what}
	page := h.url("/", model)
	switch {
	case resp.StatusCode == 401 && h.token == "":
		e.Msg = fmt.Sprintf("%s: model %s is gated or private and no hub token is set (hub answered 401). "+
			"Accept its terms at %s with your account, then set HF_TOKEN to an access token "+
			"(or put it in the file named by HF_TOKEN_PATH)", what, model, page)
	case resp.StatusCode == 401:
		e.Msg = fmt.Sprintf("%s: the hub rejected the token from HF_TOKEN (401): check it is valid and not expired", what)
	case resp.StatusCode == 403 || code == "GatedRepo":
		e.Msg = fmt.Sprintf("%s: model %s is gated and this token's account has no access (hub answered %d). "+
			"Request access at %s, then pull again", what, model, resp.StatusCode, page)
	case code == "RevisionNotFound":
		e.Msg = fmt.Sprintf("%s: revision not found on the hub; check --revision (a branch, tag or commit)", what)
	case code == "RepoNotFound":
		e.Msg = fmt.Sprintf("%s: model %s not found at %s (check the name; if it is private, set HF_TOKEN)", what, model, results.RedactURLs(h.endpoint.String()))
	case resp.StatusCode == 404:
		e.Msg = fmt.Sprintf("%s: not found on the hub (404); check the model name and --revision", what)
	default:
		e.Msg = fmt.Sprintf("%s: hub answered %s", what, resp.Status)
	}
	if hubMsg != "" {
		e.Msg += " [hub: " + hubMsg + "]"
	}
	return e
}

// answerError is statusError, retryable (after the server's Retry-After, if any) for 429 and 5xx.
func (h *hub) answerError(resp *http.Response, model, what string) error {
	serr := h.statusError(resp, model, what)
	if retryableStatus(resp.StatusCode) {
		d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		return &retryableErr{err: serr, wait: d, hasWait: ok}
	}
	return serr
}

// retryAfter parses Retry-After (seconds or an HTTP date); ok is false when absent or unreadable.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(min(max(n, 0), 1<<31)) * time.Second, n >= 0 // a negative count is no hint
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// backoff returns the wait before retry n (1-based): exponential from base to max with jitter in
// [d/2, d], or the server's Retry-After (clamped) when it sent one.
func (p retryPolicy) backoff(n int, hint time.Duration, hasHint bool) time.Duration {
	if hasHint {
		return min(hint, p.maxRetryAfter)
	}
	d := p.base
	for i := 1; i < n && d < p.max; i++ {
		d *= 2
	}
	d = min(d, p.max)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryableErr is a transient failure worth another try: 429/5xx, a cut or stalled connection.
type retryableErr struct {
	err     error
	wait    time.Duration
	hasWait bool
}

func (e *retryableErr) Error() string { return e.err.Error() }
func (e *retryableErr) Unwrap() error { return e.err }

// transient classifies transport errors: connection refused/reset, unexpected EOF and timeouts are
// worth a retry; a cancelled parent context is not.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return false // no such host: another try will not find it either
	}
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, errStalled) ||
		errors.As(err, &ne)
}

var errStalled = errors.New("connection stalled: no bytes received")

// netError names what failed; a transient failure is retryable.
func netError(ctx context.Context, what string, err error) error {
	err = fmt.Errorf("%s: %w", what, err)
	if transient(ctx, err) {
		return &retryableErr{err: err}
	}
	return err
}

// withRetry runs op until it succeeds, fails for good, or runs out of attempts. op reports progress
// (bytes moved) so a long download cut many times keeps going as long as each try gets further
// (up to 1000 tries in all).
func (h *hub) withRetry(ctx context.Context, what string, op func() (progress bool, err error)) error {
	fails := 0
	for total := 1; ; total++ {
		progress, err := op()
		if err == nil {
			return nil
		}
		var re *retryableErr
		if !errors.As(err, &re) {
			return err
		}
		if progress {
			fails = 0
		}
		fails++
		if fails >= h.retry.attempts || total >= 1000 {
			return fmt.Errorf("%s: gave up after %d tries: %w", what, total, re.err)
		}
		if err := sleepCtx(ctx, h.retry.backoff(fails, re.wait, re.hasWait)); err != nil {
			return fmt.Errorf("%s: %w (while waiting to retry after: %w)", what, err, re.err)
		}
	}
}

// getJSON GETs an API URL into v, retrying transient failures. It returns the response headers
// (for the Link header of paged answers).
func (h *hub) getJSON(ctx context.Context, rawURL, model, what string, limit int64, v any) (http.Header, error) {
	var hdr http.Header
	err := h.withRetry(ctx, what, func() (bool, error) {
		resp, _, err := h.do(ctx, http.MethodGet, rawURL, http.Header{"Accept": {"application/json"}})
		if err != nil {
			return false, netError(ctx, what, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, h.answerError(resp, model, what)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return false, netError(ctx, what, err)
		}
		if int64(len(b)) > limit {
			return false, fmt.Errorf("%s: answer larger than %d bytes; is %s a Hugging Face-compatible hub?", what, limit, results.RedactURLs(h.endpoint.String()))
		}
		if err := json.Unmarshal(b, v); err != nil {
			return false, fmt.Errorf("%s: the hub's JSON does not parse (%w); is %s a Hugging Face-compatible hub?", what, err, results.RedactURLs(h.endpoint.String()))
		}
		hdr = resp.Header
		return false, nil
	})
	return hdr, err
}

// revisionInfo is the part of GET /api/models/{repo}/revision/{rev} gpuvet reads.
type revisionInfo struct {
	ID       string          `json:"id"`
	SHA      string          `json:"sha"`
	Gated    json.RawMessage `json:"gated"` // false, "auto" or "manual"
	Private  bool            `json:"private"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
	} `json:"siblings"`
}

// gated reports whether the hub marks the model gated (any value but absent/false).
func (r *revisionInfo) gated() bool {
	g := strings.TrimSpace(string(r.Gated))
	return g != "" && g != "false" && g != "null" && g != `""`
}

// parseRevision checks the revision answer: the commit must be a 40-hex sha.
func parseRevision(b []byte) (*revisionInfo, error) {
	var r revisionInfo
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("revision info: %w", err)
	}
	if !commitRe.MatchString(r.SHA) {
		return nil, fmt.Errorf("revision info: field sha is %q, expected a 40-hex commit", r.SHA)
	}
	return &r, nil
}

func (h *hub) revision(ctx context.Context, model, rev string) (*revisionInfo, error) {
	var raw json.RawMessage
	what := fmt.Sprintf("revision %s of %s", rev, model)
	if _, err := h.getJSON(ctx, h.apiModelURL(model, "revision", rev), model, what, 16<<20, &raw); err != nil {
		return nil, err
	}
	r, err := parseRevision(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return r, nil
}

// treeEntry is one element of GET /api/models/{repo}/tree/{rev}?recursive=true.
type treeEntry struct {
	Type string `json:"type"` // "file" or "directory"
	OID  string `json:"oid"`  // git blob sha1 (what the hub's ETag is for a non-LFS file)
	Size int64  `json:"size"`
	Path string `json:"path"`
	LFS  *struct {
		OID         string `json:"oid"` // sha256 of the content (the LFS file's ETag/X-Linked-Etag)
		Size        int64  `json:"size"`
		PointerSize int64  `json:"pointerSize"`
	} `json:"lfs"`
}

// parseTree turns one page of the tree API into files, checking every field gpuvet relies on.
func parseTree(b []byte) ([]File, error) {
	var entries []treeEntry
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, fmt.Errorf("file tree: %w", err)
	}
	var out []File
	for i, e := range entries {
		if e.Type != "file" {
			continue
		}
		f := File{Path: e.Path, Size: e.Size, Blob: e.OID}
		if e.LFS != nil {
			f = File{Path: e.Path, Size: e.LFS.Size, Blob: e.LFS.OID, LFS: true}
		}
		if err := f.validate(); err != nil {
			return nil, fmt.Errorf("file tree entry %d: %w", i, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// nextLink returns the rel="next" URL of a Link header ("" when none).
func nextLink(link string) string {
	for _, part := range strings.Split(link, ",") {
		seg := strings.Split(part, ";")
		if len(seg) < 2 {
			continue
		}
		target := strings.TrimSpace(seg[0])
		if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
			continue
		}
		for _, p := range seg[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "rel") && strings.Trim(strings.TrimSpace(v), `"`) == "next" {
				return target[1 : len(target)-1]
			}
		}
	}
	return ""
}

// tree lists every file of the model at commit, following the hub's Link: rel="next" pages (only
// on the hub's own host, so the token is not sent elsewhere).
func (h *hub) tree(ctx context.Context, model, commit string) ([]File, error) {
	what := fmt.Sprintf("file list of %s at %s", model, commit)
	next := h.apiModelURL(model, "tree", commit) + "?recursive=true&expand=false"
	var out []File
	seen := map[string]bool{}
	for page := 0; next != ""; page++ {
		if page > 10000 || seen[next] {
			return nil, fmt.Errorf("%s: the hub's pages do not end (page %d, %s)", what, page, results.RedactURLs(next))
		}
		seen[next] = true
		var raw json.RawMessage
		hdr, err := h.getJSON(ctx, next, model, what, 64<<20, &raw)
		if err != nil {
			return nil, err
		}
		files, err := parseTree(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, files...)
		next = ""
		if l := nextLink(hdr.Get("Link")); l != "" {
			nu, err := h.endpoint.Parse(l)
			if err != nil || !sameOrigin(nu, h.endpoint) {
				return nil, fmt.Errorf("%s: next page %q is not on the hub's host", what, l)
			}
			next = nu.String()
		}
	}
	return out, nil
}
