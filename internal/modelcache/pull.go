// Package modelcache keeps model weights in the Hugging Face hub cache layout: it downloads a
// snapshot once from a Hugging Face-compatible hub (resumable, verified, throttling-aware) and hands
// engines a cache they read with the hub offline (HF_HUB_OFFLINE=1), so no engine process downloads
// weights or needs a token.
package modelcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Options says where and what to pull. Zero values mean the defaults noted on each field.
type Options struct {
	CacheDir string   // hub cache dir (holds models--*); default HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub
	Endpoint string   // hub URL; default HF_ENDPOINT, else https://huggingface.co
	Revision string   // branch, tag or commit; default "main"
	Include  []string // fnmatch globs of repo paths to fetch (e.g. "*.safetensors", "*.json"); none = all
	Workers  int      // parallel downloads; default 8
	Offline  bool     // never touch the network (also when HF_HUB_OFFLINE=1 is set)

	// Progress receives a progress bar (bytes, rate); nil for none.
	Progress io.Writer

	retry *retryPolicy  // tests: faster backoff
	stall time.Duration // tests: shorter stall timeout
}

// Snapshot is one model commit in the cache.
type Snapshot struct {
	Model           string   `json:"model"`
	Commit          string   `json:"commit"`
	Dir             string   `json:"dir"`            // snapshots/<commit>: what an engine is pointed at
	Refs            []string `json:"refs,omitempty"` // revisions (branches, tags) pointing at Commit
	Files           []File   `json:"files"`
	Size            int64    `json:"size"`             // bytes of Files
	BytesDownloaded int64    `json:"bytes_downloaded"` // bytes received by this call
}

// pullConfig is Options with defaults applied and inputs checked.
type pullConfig struct {
	Options
	include *globMatcher
}

func (o Options) resolve(model string) (*pullConfig, error) {
	if err := ValidateModel(model); err != nil {
		return nil, err
	}
	c := &pullConfig{Options: o}
	c.CacheDir = cmp.Or(c.CacheDir, DefaultCacheDir())
	abs, err := filepath.Abs(c.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("cache dir %q: %w", c.CacheDir, err)
	}
	c.CacheDir = abs
	c.Endpoint = cmp.Or(c.Endpoint, os.Getenv("HF_ENDPOINT"), DefaultEndpoint)
	c.Endpoint = strings.TrimRight(c.Endpoint, "/")
	c.Revision = cmp.Or(c.Revision, "main")
	if err := validateRevision(c.Revision); err != nil {
		return nil, err
	}
	c.Workers = cmp.Or(c.Workers, 8)
	if c.Workers < 1 || c.Workers > 64 {
		return nil, fmt.Errorf("workers %d: expected 1 to 64 parallel downloads", c.Workers)
	}
	if c.include, err = compileGlobs(c.Include); err != nil {
		return nil, err
	}
	c.Offline = c.Offline || envTrue("HF_HUB_OFFLINE")
	return c, nil
}

func envTrue(k string) bool {
	return slices.Contains([]string{"1", "true", "yes", "on"}, strings.ToLower(strings.TrimSpace(os.Getenv(k))))
}

// PullCommand is the exact command that fills the cache with what o asks for.
func PullCommand(model string, o Options) string {
	args := []string{"gpuvet", "cache", "pull", shellQuote(model)}
	if o.Revision != "" && o.Revision != "main" {
		args = append(args, "--revision", shellQuote(o.Revision))
	}
	if o.CacheDir != "" {
		args = append(args, "--cache-dir", shellQuote(o.CacheDir))
	}
	for _, p := range o.Include {
		args = append(args, "--include", shellQuote(p))
	}
	if o.Endpoint != "" && o.Endpoint != DefaultEndpoint {
		args = append(args, "--endpoint", shellQuote(o.Endpoint))
	}
	return strings.Join(args, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// EngineEnv is the environment an engine process (vLLM, SGLang, transformers) needs to load models
// from cacheDir with the hub offline: it never downloads and needs no token.
func EngineEnv(cacheDir string) []string {
	cacheDir = cmp.Or(cacheDir, DefaultCacheDir())
	if abs, err := filepath.Abs(cacheDir); err == nil {
		cacheDir = abs
	}
	env := []string{"HF_HUB_CACHE=" + cacheDir, "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1"}
	if filepath.Base(cacheDir) == "hub" {
		env = append([]string{"HF_HOME=" + filepath.Dir(cacheDir)}, env...)
	}
	return env
}

// Pull downloads model at o.Revision into the cache and returns the snapshot. Files already in the
// cache are not transferred again: a repeated pull costs one small revision request (none offline,
// where it only checks the cache).
func Pull(ctx context.Context, model string, o Options) (*Snapshot, error) {
	c, err := o.resolve(model)
	if err != nil {
		return nil, err
	}
	if c.Offline {
		s, err := local(c, model)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return nil, fmt.Errorf("%s (revision %s) is not in the cache %s and the hub is offline (HF_HUB_OFFLINE=1); on a host with access to %s run:\n  %s\nand copy %s here",
				model, c.Revision, c.CacheDir, c.Endpoint, PullCommand(model, o), c.CacheDir)
		}
		return s, nil
	}
	return pull(ctx, c, model)
}

func pull(ctx context.Context, c *pullConfig, model string) (*Snapshot, error) {
	token, err := readToken()
	if err != nil {
		return nil, err
	}
	h, err := newHub(c.Endpoint, token)
	if err != nil {
		return nil, err
	}
	if c.retry != nil {
		h.retry = *c.retry
	}
	if c.stall > 0 {
		h.stall = c.stall
	}
	info, err := h.revision(ctx, model, c.Revision)
	if err != nil {
		return nil, err
	}
	if info.gated() && token == "" {
		return nil, &HubError{Status: 401, Code: "GatedRepo", What: model, Msg: fmt.Sprintf(
			"model %s is gated: set HF_TOKEN to an access token of an account that accepted its terms at %s/%s (or put the token in the file named by HF_TOKEN_PATH)",
			model, c.Endpoint, model)}
	}
	commit := info.SHA
	repo := repoDir(c.CacheDir, model)
	m, err := readManifest(repo, commit)
	if err != nil {
		files, err := h.tree(ctx, model, commit)
		if treeUnsupported(err) {
			// Some hub proxies serve only the revision and resolve endpoints: list from the
			// revision's siblings and ask each file's hash and size with a HEAD.
			files, err = h.headAll(ctx, model, commit, info, c)
		}
		if err != nil {
			return nil, err
		}
		m = &manifest{Model: model, Commit: commit, Files: files}
	}
	want, err := selectFiles(m, c)
	if err != nil {
		return nil, err
	}
	var missing []File
	snap := &Snapshot{Model: model, Commit: commit, Dir: snapshotDir(repo, commit), Files: want}
	for _, f := range want {
		snap.Size += f.Size
		if !present(repo, commit, f) {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		if err := os.MkdirAll(filepath.Join(repo, "blobs"), 0o755); err != nil {
			return nil, diskError(err, model, File{Path: "blobs"}, "create cache folder")
		}
		n, err := fetchAll(ctx, c, h, repo, model, commit, missing)
		snap.BytesDownloaded = n
		if err != nil {
			return snap, err
		}
	}
	if err := writeManifest(repo, m); err != nil {
		return snap, diskError(err, model, File{Path: ".gpuvet"}, "write manifest")
	}
	if err := writeRef(repo, c.Revision, commit); err != nil {
		return snap, diskError(err, model, File{Path: "refs/" + c.Revision}, "write ref")
	}
	snap.Refs = readAllRefs(repo)[commit]
	return snap, nil
}

// selectFiles picks the files --include asks for; none matching is an error naming a few that exist.
func selectFiles(m *manifest, c *pullConfig) ([]File, error) {
	var want []File
	for _, f := range m.Files {
		if c.include.match(f.Path) {
			want = append(want, f)
		}
	}
	if len(want) == 0 {
		var names []string
		for i, f := range m.Files {
			if i == 8 {
				names = append(names, "…")
				break
			}
			names = append(names, f.Path)
		}
		return nil, fmt.Errorf("no file of %s at %s matches --include %q; the repo has %d files: %s",
			m.Model, m.Commit, c.Include, len(m.Files), strings.Join(names, ", "))
	}
	return want, nil
}

// fetchAll downloads files with c.Workers in parallel, largest first (so the long tail is short).
// The first hard failure cancels the rest; their partial files stay for the next pull to resume.
func fetchAll(ctx context.Context, c *pullConfig, h *hub, repo, model, commit string, files []File) (int64, error) {
	need, partial := toFetch(repo, files)
	if err := checkFreeSpace(c.CacheDir, need-partial); err != nil {
		return 0, err
	}
	bar := newBar(c.Progress, model, need, partial)
	var barMu sync.Mutex
	ft := &fetcher{h: h, cacheDir: c.CacheDir, repo: repo, model: model, commit: commit,
		progress: func(n int64) {
			if bar == nil {
				return
			}
			barMu.Lock()
			defer barMu.Unlock()
			_ = bar.Add64(n)
		}}
	sort.Slice(files, func(i, j int) bool { return files[i].Size > files[j].Size })

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, c.Workers)
feed:
	for _, f := range files {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break feed
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := ft.fetch(ctx, f); err != nil {
				mu.Lock()
				if !errors.Is(err, context.Canceled) || ctx.Err() == nil || len(errs) == 0 {
					errs = append(errs, err)
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	n := ft.downloaded.Load()
	if bar != nil {
		if len(errs) == 0 && ctx.Err() == nil {
			_ = bar.Finish()
		} else {
			_ = bar.Exit() // stop where it is: a failed pull must not show 100 %
			fmt.Fprintln(c.Progress)
		}
	}
	if len(errs) > 0 {
		return n, firstRealError(errs)
	}
	return n, ctx.Err()
}

// toFetch is the bytes files need in all and the bytes of them already in partial downloads. A blob
// already in blobs/ (another snapshot's: fetch only links it) costs nothing, and a blob two paths
// share is fetched once.
func toFetch(repo string, files []File) (need, partial int64) {
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.Blob] {
			continue
		}
		seen[f.Blob] = true
		if st, err := os.Stat(blobPath(repo, f.Blob)); err == nil && st.Size() == f.Size {
			continue
		}
		need += f.Size
		if st, err := os.Stat(blobPath(repo, f.Blob) + ".incomplete"); err == nil && st.Size() <= f.Size {
			partial += st.Size()
		}
	}
	return need, partial
}

// firstRealError prefers the cause over the cancellations it triggered in the other workers.
func firstRealError(errs []error) error {
	for _, e := range errs {
		if !errors.Is(e, context.Canceled) {
			if len(errs) > 1 {
				return fmt.Errorf("%w (and %d more file(s) stopped; their partial files are kept)", e, len(errs)-1)
			}
			return e
		}
	}
	return errs[0]
}

func newBar(w io.Writer, model string, total, done int64) *progressbar.ProgressBar {
	if w == nil {
		return nil
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("pull "+model),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
	if done > 0 {
		_ = bar.Add64(done)
	}
	return bar
}

// HumanBytes prints a byte count in binary units (KiB, MiB, …), for progress and listings.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// local finds the snapshot o asks for in the cache with no network: nil, nil when it is not there
// (or not complete).
func local(c *pullConfig, model string) (*Snapshot, error) {
	repo := repoDir(c.CacheDir, model)
	commit, err := readRef(repo, c.Revision)
	if err != nil || commit == "" {
		return nil, err
	}
	snap := &Snapshot{Model: model, Commit: commit, Dir: snapshotDir(repo, commit), Refs: readAllRefs(repo)[commit]}
	m, err := readManifest(repo, commit)
	if err == nil {
		want, err := selectFiles(m, c)
		if err != nil {
			return nil, err
		}
		for _, f := range want {
			if !present(repo, commit, f) {
				return nil, nil
			}
			snap.Size += f.Size
		}
		snap.Files = want
		return snap, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	// Filled by another tool (huggingface-cli, an engine): accept a snapshot whose every link resolves
	// and that has a file for each include pattern, as the hub libraries do offline.
	s, err := scanSnapshot(repo, model, commit)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	if len(s.Files) == 0 {
		return nil, nil
	}
	if slices.ContainsFunc(s.Files, func(f File) bool { return f.Size < 0 }) {
		return nil, nil
	}
	for _, p := range c.Include {
		g, _ := compileGlobs([]string{p})
		if !slices.ContainsFunc(s.Files, func(f File) bool { return g.match(f.Path) }) {
			return nil, nil
		}
	}
	s.Refs, s.Size = snap.Refs, 0
	s.Files = slices.DeleteFunc(s.Files, func(f File) bool { return !c.include.match(f.Path) })
	for _, f := range s.Files {
		s.Size += f.Size
	}
	return s, nil
}

// Ensure returns the snapshot from the cache without touching the network when it is there; when it
// is not, it pulls it, unless the host is offline (Options.Offline, HF_HUB_OFFLINE=1) or cannot reach
// the hub, where it fails at once with the exact `gpuvet cache pull` command to run.
func Ensure(ctx context.Context, model string, o Options) (*Snapshot, error) {
	c, err := o.resolve(model)
	if err != nil {
		return nil, err
	}
	s, err := local(c, model)
	if err != nil || s != nil {
		return s, err
	}
	o.CacheDir, o.Endpoint = c.CacheDir, c.Endpoint // the command names the hub this host was told to use
	if c.Offline {
		return nil, fmt.Errorf("model %s (revision %s) is not in the cache %s and the hub is offline; on a host that can reach %s run:\n  %s\nthen copy %s to this host",
			model, c.Revision, c.CacheDir, c.Endpoint, PullCommand(model, o), c.CacheDir)
	}
	// One try first, so an air-gapped host fails now rather than after the downloader's retries.
	err = probe(ctx, c.Endpoint)
	if err == nil {
		s, err = pull(ctx, c, model)
	}
	if err != nil && unreachable(err) {
		return nil, fmt.Errorf("model %s is not in the cache %s and the hub %s is unreachable (%w); if this host is air-gapped, on a host that can reach it run:\n  %s\nthen copy %s to this host",
			model, c.CacheDir, c.Endpoint, err, PullCommand(model, o), c.CacheDir)
	}
	return s, err
}

// probe makes one request to the hub with no retry: any answer means it can be reached.
func probe(ctx context.Context, endpoint string) error {
	h, err := newHub(endpoint, "")
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, h.endpoint.String()+"/", nil)
	if err != nil {
		return err
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// unreachable reports network failures that mean "no route to the hub" rather than a hub answer.
func unreachable(err error) bool {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	return errors.As(err, &dnsErr) || (errors.As(err, &opErr) && opErr.Op == "dial") ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH)
}

// Check validates model and o (names, revision, globs, workers) without touching disk or network,
// so a CLI can reject bad input before anything starts.
func (o Options) Check(model string) error {
	_, err := o.resolve(model)
	return err
}
