package modelcache

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
)

var fastRetry = &retryPolicy{attempts: 5, base: 10 * time.Millisecond, max: 50 * time.Millisecond, maxRetryAfter: 5 * time.Second}

// isolate keeps tests away from the machine's real hub settings and token.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{"HF_TOKEN", "HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_HUB_CACHE"} {
		t.Setenv(k, "")
	}
	t.Setenv("HF_HOME", filepath.Join(dir, "hfhome"))
	t.Setenv("HF_TOKEN_PATH", filepath.Join(dir, "no-token-file"))
	return filepath.Join(dir, "hub")
}

func opts(fh *fakeHub, cache string) Options {
	return Options{CacheDir: cache, Endpoint: fh.endpoint(), Workers: 4, retry: fastRetry, stall: 5 * time.Second}
}

// checkSnapshot asserts the hub layout: refs/main holds the commit, every file is a relative
// symlink into blobs/ whose content equals the hub's, and no .incomplete file is left.
func checkSnapshot(t *testing.T, cache string, repo *fakeRepo, s *Snapshot) {
	t.Helper()
	rd := repoDir(cache, repo.model)
	if got := filepath.Base(rd); got != "models--"+strings.ReplaceAll(repo.model, "/", "--") {
		t.Fatalf("repo folder %s", got)
	}
	ref, err := os.ReadFile(filepath.Join(rd, "refs", "main"))
	if err != nil || string(ref) != repo.commit {
		t.Fatalf("refs/main = %q, %v; want %s", ref, err, repo.commit)
	}
	if s.Commit != repo.commit || s.Dir != filepath.Join(rd, "snapshots", repo.commit) {
		t.Fatalf("snapshot %+v", s)
	}
	for p, want := range repo.files {
		link := filepath.Join(s.Dir, filepath.FromSlash(p))
		target, err := os.Readlink(link)
		if err != nil {
			t.Fatalf("%s: not a symlink: %v", p, err)
		}
		if filepath.IsAbs(target) || !strings.HasPrefix(target, "../") || filepath.Base(target) != repo.blobID(p) {
			t.Fatalf("%s -> %s: want a relative link to blobs/%s", p, target, repo.blobID(p))
		}
		got, err := os.ReadFile(link)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: content differs from the hub's (%v)", p, err)
		}
	}
	inc, _ := filepath.Glob(filepath.Join(rd, "blobs", "*.incomplete"))
	if len(inc) > 0 {
		t.Fatalf("left partial files: %v", inc)
	}
}

func TestPullThrottledAndCutThenNothing(t *testing.T) {
	cache := isolate(t)
	repo := testModel("acme/tiny-llm", 1)
	fh := newFakeHub(t, repo)
	fh.mu.Lock()
	fh.throttle["model-00001-of-00002.safetensors"] = 1 // one 429 with Retry-After: 1
	fh.cut["model-00002-of-00002.safetensors"] = 700 << 10
	fh.cut["config.json"] = 10 // a small (non-LFS) file cut too
	fh.mu.Unlock()

	var bar bytes.Buffer
	o := opts(fh, cache)
	o.Progress = &bar
	start := time.Now()
	s, err := Pull(context.Background(), repo.model, o)
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, repo, s)
	if err := Verify(cache, repo.model); err != nil {
		t.Fatal(err)
	}
	if s.BytesDownloaded != repo.total() || s.Size != repo.total() || len(s.Files) != len(repo.files) {
		t.Fatalf("downloaded %d size %d files %d; want %d bytes, %d files", s.BytesDownloaded, s.Size, len(s.Files), repo.total(), len(repo.files))
	}
	// Retry-After: 1 was honoured (the fast backoff alone would have retried within 50 ms).
	if time.Since(start) < time.Second {
		t.Fatalf("pull took %v: the 429's Retry-After of 1s was not honoured", time.Since(start))
	}
	shard1 := fh.rangesOf("model-00001-of-00002.safetensors")
	if len(shard1) != 2 {
		t.Fatalf("throttled shard: %d requests, want 2 (429 then 200)", len(shard1))
	}
	// The cut shard resumed with a Range from where the cut left it, not from 0.
	r2 := fh.rangesOf("model-00002-of-00002.safetensors")
	if len(r2) != 2 || r2[0] != "" || !strings.HasPrefix(r2[1], "bytes=") || r2[1] == "bytes=0-" {
		t.Fatalf("cut shard requests %q: want a first plain GET then a Range resume", r2)
	}
	if fh.servedOf("model-00002-of-00002.safetensors") != int64(len(repo.files["model-00002-of-00002.safetensors"])) {
		t.Fatalf("cut shard: served %d bytes in all, want exactly its size %d (resume must not refetch)",
			fh.servedOf("model-00002-of-00002.safetensors"), len(repo.files["model-00002-of-00002.safetensors"]))
	}
	if fh.count("tree") != 3 { // 8 entries (7 files + 1 directory), pages of 3
		t.Fatalf("tree pages fetched: %d, want 3", fh.count("tree"))
	}
	if !strings.Contains(bar.String(), "pull acme/tiny-llm") || !strings.Contains(bar.String(), "MB") {
		t.Fatalf("progress output lacks the bar: %q", bar.String())
	}

	// Second pull: one revision call, no tree, no file transferred.
	fh.reset()
	s2, err := Pull(context.Background(), repo.model, o)
	if err != nil {
		t.Fatal(err)
	}
	if fh.totalServed() != 0 || s2.BytesDownloaded != 0 || fh.count("resolve") != 0 || fh.count("cdn") != 0 {
		t.Fatalf("second pull transferred %d bytes (%d resolve, %d cdn requests)", fh.totalServed(), fh.count("resolve"), fh.count("cdn"))
	}
	if fh.count("revision") != 1 || fh.count("tree") != 0 {
		t.Fatalf("second pull: %d revision, %d tree calls; want 1, 0", fh.count("revision"), fh.count("tree"))
	}
	checkSnapshot(t, cache, repo, s2)

	// Offline: no request at all.
	fh.reset()
	t.Setenv("HF_HUB_OFFLINE", "1")
	s3, err := Pull(context.Background(), repo.model, o)
	if err != nil || s3.Commit != repo.commit || len(s3.Files) != len(repo.files) {
		t.Fatalf("offline pull: %v %+v", err, s3)
	}
	if n := fh.count("revision") + fh.count("tree") + fh.count("resolve") + fh.count("cdn"); n != 0 {
		t.Fatalf("offline pull made %d requests", n)
	}
}

// TestResumeAfterCancel stops a pull mid-file (as a kill would) and shows the next pull resumes
// with a Range from the partial file's size, transferring only the rest.
func TestResumeAfterCancel(t *testing.T) {
	cache := isolate(t)
	repo := testModel("acme/resume", 2)
	fh := newFakeHub(t, repo)
	big := "model-00001-of-00002.safetensors"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fh.mu.Lock()
	fh.slow[big] = 2 * time.Millisecond
	fh.mu.Unlock()
	fh.mu.Lock()
	fh.onBytes = func(p string, n int64) {
		if p == big && n >= 1<<20 {
			cancel()
		}
	}
	fh.mu.Unlock()
	o := opts(fh, cache)
	_, err := Pull(ctx, repo.model, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull: err %v, want context.Canceled", err)
	}
	fh.quiesce()
	inc := blobPath(repoDir(cache, repo.model), repo.blobID(big)) + ".incomplete"
	st, err := os.Stat(inc)
	if err != nil || st.Size() == 0 {
		t.Fatalf("partial file %s: %v (size %v)", inc, err, st)
	}
	if _, err := os.Lstat(filepath.Join(repoDir(cache, repo.model), "snapshots", repo.commit, big)); err == nil {
		t.Fatal("a partial file is linked into snapshots/")
	}
	assertResumes(t, fh, cache, repo, big, st.Size())
}

// assertResumes pulls again and checks the big file resumed at partial via Range.
func assertResumes(t *testing.T, fh *fakeHub, cache string, repo *fakeRepo, big string, partial int64) {
	t.Helper()
	fh.reset()
	s, err := Pull(context.Background(), repo.model, opts(fh, cache))
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, repo, s)
	want := "bytes=" + itoa(partial) + "-"
	if r := fh.rangesOf(big); len(r) != 1 || r[0] != want {
		t.Fatalf("resume requests for %s: %q, want [%q]", big, r, want)
	}
	if got, rest := fh.servedOf(big), int64(len(repo.files[big]))-partial; got != rest {
		t.Fatalf("resume served %d bytes of %s, want the remaining %d", got, big, rest)
	}
	if err := Verify(cache, repo.model); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestServerIgnoresRange(t *testing.T) {
	cache := isolate(t)
	repo := testModel("acme/norange", 3)
	fh := newFakeHub(t, repo)
	big := "model-00002-of-00002.safetensors"
	rd := repoDir(cache, repo.model)
	if err := os.MkdirAll(filepath.Join(rd, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	inc := blobPath(rd, repo.blobID(big)) + ".incomplete"
	if err := os.WriteFile(inc, repo.files[big][:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	fh.mu.Lock()
	fh.ignoreRange[big] = true
	fh.mu.Unlock()
	s, err := Pull(context.Background(), repo.model, opts(fh, cache))
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, repo, s)
	if r := fh.rangesOf(big); len(r) != 1 || r[0] != "bytes=1000-" {
		t.Fatalf("requests %q: want one Range request", r)
	}
}

func TestHashMismatchNotLinked(t *testing.T) {
	cache := isolate(t)
	repo := testModel("acme/corrupt", 4)
	fh := newFakeHub(t, repo)
	bad := "model-00001-of-00002.safetensors"
	fh.mu.Lock()
	fh.corrupt[bad] = true
	fh.mu.Unlock()
	_, err := Pull(context.Background(), repo.model, opts(fh, cache))
	var hm *HashMismatchError
	if !errors.As(err, &hm) || hm.Path != bad || hm.Want != repo.blobID(bad) {
		t.Fatalf("err %v: want a hash mismatch for %s", err, bad)
	}
	rd := repoDir(cache, repo.model)
	for _, p := range []string{blobPath(rd, repo.blobID(bad)), blobPath(rd, repo.blobID(bad)) + ".incomplete",
		filepath.Join(rd, "snapshots", repo.commit, bad)} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s exists after a hash mismatch", p)
		}
	}
	if _, err := os.Stat(filepath.Join(rd, "refs", "main")); err == nil {
		t.Fatal("refs/main written for an incomplete snapshot")
	}
	// Ensure offline must not accept the incomplete snapshot.
	o := opts(fh, cache)
	o.Offline = true
	if _, err := Ensure(context.Background(), repo.model, o); err == nil || !strings.Contains(err.Error(), "gpuvet cache pull acme/corrupt") {
		t.Fatalf("Ensure offline on an incomplete snapshot: %v", err)
	}
	// The hub fixed: the next pull completes.
	fh.reset()
	s, err := Pull(context.Background(), repo.model, opts(fh, cache))
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, repo, s)
}

// isGated reports whether err is the hub's answer for a gated or private model whose token is
// missing or lacks access.
func isGated(err error) bool {
	var he *HubError
	return errors.As(err, &he) && (he.Code == "GatedRepo" || he.Status == 401 || he.Status == 403)
}

func TestGatedRepo(t *testing.T) {
	cache := isolate(t)
	repo := testModel("acme/gated-llm", 5)
	repo.gated = true
	fh := newFakeHub(t, repo)
	var out bytes.Buffer
	o := opts(fh, cache)
	o.Progress = &out

	_, err := Pull(context.Background(), repo.model, o)
	if err == nil || !isGated(err) || !strings.Contains(err.Error(), "gated") || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("no token: %v; want a message saying the model is gated and HF_TOKEN must be set", err)
	}

	t.Setenv("HF_TOKEN", "hf_wrong_SECRET_value")
	_, err = Pull(context.Background(), repo.model, o)
	if err == nil || !isGated(err) || strings.Contains(err.Error(), "hf_wrong_SECRET_value") {
		t.Fatalf("wrong token: %v; want an access error that does not show the token", err)
	}

	t.Setenv("HF_TOKEN", "")
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(fh.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_TOKEN_PATH", tokFile)
	fh.mu.Lock()
	fh.cut["model-00001-of-00002.safetensors"] = 100 << 10
	fh.mu.Unlock()
	s, err := Pull(context.Background(), repo.model, o)
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, repo, s)
	if len(fh.cdnAuth) != 0 {
		t.Fatalf("the token followed the redirect to the CDN: %d requests carried Authorization", len(fh.cdnAuth))
	}
	if fh.count("cdn") == 0 {
		t.Fatal("LFS files did not come from the CDN")
	}
	for _, secret := range []string{fh.token, "hf_wrong_SECRET_value"} {
		if strings.Contains(out.String(), secret) {
			t.Fatal("the token appeared in the progress output")
		}
	}
}

func TestIncludeAndEnsure(t *testing.T) {
	cache := isolate(t)
	repo := testModel("acme/include", 6)
	fh := newFakeHub(t, repo)
	o := opts(fh, cache)
	o.Include = []string{"*.json", "sub/"}
	s, err := Pull(context.Background(), repo.model, o)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range s.Files {
		got = append(got, f.Path)
	}
	want := "config.json,model.safetensors.index.json,sub/dir/extra.txt,tokenizer.json"
	if strings.Join(sortStrings(got), ",") != want {
		t.Fatalf("included %v, want %s", got, want)
	}
	if fh.servedOf("model-00001-of-00002.safetensors") != 0 {
		t.Fatal("an excluded shard was downloaded")
	}

	// Ensure with the same include: present, no network.
	fh.reset()
	if _, err := Ensure(context.Background(), repo.model, o); err != nil {
		t.Fatal(err)
	}
	if fh.count("revision")+fh.count("resolve") != 0 {
		t.Fatal("Ensure of a present snapshot touched the network")
	}
	// Ensure of everything offline: the shards are missing, so it names the command to run.
	all := opts(fh, cache)
	all.Offline = true
	_, err = Ensure(context.Background(), repo.model, all)
	if err == nil || !strings.Contains(err.Error(), "gpuvet cache pull acme/include --cache-dir "+cache) {
		t.Fatalf("Ensure offline of a partial cache: %v", err)
	}
	// Online, Ensure pulls the rest.
	all.Offline = false
	s, err = Ensure(context.Background(), repo.model, all)
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, repo, s)

	// No file matches: a clear error naming what exists.
	bad := opts(fh, cache)
	bad.Include = []string{"*.gguf"}
	if _, err := Pull(context.Background(), repo.model, bad); err == nil || !strings.Contains(err.Error(), "matches --include") {
		t.Fatalf("include matching nothing: %v", err)
	}
}

func TestEnsureAirGapped(t *testing.T) {
	cache := isolate(t)
	// Nothing listens on port 1 of loopback: the hub is unreachable.
	o := Options{CacheDir: cache, Endpoint: "http://127.0.0.1:1", retry: fastRetry}
	_, err := Ensure(context.Background(), "acme/air", o)
	if err == nil || !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), "gpuvet cache pull acme/air --cache-dir "+cache+" --endpoint http://127.0.0.1:1") {
		t.Fatalf("air-gapped Ensure: %v", err)
	}
}

func TestHubErrors(t *testing.T) {
	cache := isolate(t)
	fh := newFakeHub(t, testModel("acme/known", 7))
	for _, tc := range []struct{ model, rev, want string }{
		{"acme/unknown", "main", "not found"},
		{"acme/known", "v9", "revision not found"},
		{"bad--name", "main", "not a valid hub name"},
		{"acme/known", "../x", "not allowed in a revision"},
	} {
		o := opts(fh, cache)
		o.Revision = tc.rev
		_, err := Pull(context.Background(), tc.model, o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s@%s: %v; want %q", tc.model, tc.rev, err, tc.want)
		}
	}
}

func TestEngineEnv(t *testing.T) {
	env := EngineEnv("/data/hf/hub")
	want := []string{"HF_HOME=/data/hf", "HF_HUB_CACHE=/data/hf/hub", "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1"}
	if strings.Join(env, " ") != strings.Join(want, " ") {
		t.Fatalf("EngineEnv = %v, want %v", env, want)
	}
	if env := EngineEnv("/mnt/models"); strings.Contains(strings.Join(env, " "), "HF_HOME") {
		t.Fatalf("EngineEnv(/mnt/models) = %v: HF_HOME only when the dir is <home>/hub", env)
	}
}

func sortStrings(s []string) []string { sort.Strings(s); return s }

// TestConcurrentPulls runs two pulls of one model into one cache at once (as two gpuvet processes on
// a shared cache would): both succeed and every file crosses the wire once.
func TestConcurrentPulls(t *testing.T) {
	cache := isolate(t)
	repo := testModel("acme/shared", 9)
	fh := newFakeHub(t, repo)
	fh.mu.Lock()
	fh.slow["model-00001-of-00002.safetensors"] = time.Millisecond
	fh.mu.Unlock()
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := Pull(context.Background(), repo.model, opts(fh, cache))
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := fh.totalServed(); got != repo.total() {
		t.Fatalf("two concurrent pulls served %d bytes, want each file once: %d", got, repo.total())
	}
	if err := Verify(cache, repo.model); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPull measures pull throughput from the loopback test hub (64 MiB in 4 LFS shards + JSON):
// it reports MB/s, the downloader's own overhead ceiling (hashing, file writes, HTTP).
func BenchmarkPull(b *testing.B) {
	repo := &fakeRepo{model: "acme/bench", commit: strings.Repeat("be", 20), branch: "main",
		files: map[string][]byte{"config.json": []byte(`{}`)}, lfs: map[string]bool{}}
	for i := range 4 {
		p := "model-0000" + strconv.Itoa(i+1) + ".safetensors"
		repo.files[p], repo.lfs[p] = randBytes(uint64(i), 16<<20), true
	}
	t := &testing.T{}
	fh := newFakeHub(t, repo)
	defer fh.hub.Close()
	defer fh.cdn.Close()
	b.SetBytes(repo.total())
	b.ResetTimer()
	for i := range b.N {
		cache := filepath.Join(b.TempDir(), strconv.Itoa(i))
		if _, err := Pull(context.Background(), repo.model, Options{CacheDir: cache, Endpoint: fh.endpoint()}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCacheEnvHook is the `gpuvet run` path: pull once, then the engine env; offline afterwards.
func TestCacheEnvHook(t *testing.T) {
	cache := isolate(t)
	repo := testModel("acme/run", 13)
	fh := newFakeHub(t, repo)
	t.Setenv("HF_ENDPOINT", fh.endpoint())
	env, err := CacheEnv(context.Background(), repo.model, "vllm", config.ModelCache{Dir: cache, Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	if env["HF_HUB_CACHE"] != cache || env["HF_HUB_OFFLINE"] != "1" || env["HF_HOME"] != filepath.Dir(cache) {
		t.Fatalf("engine env %v", env)
	}
	if fh.totalServed() != repo.total() {
		t.Fatalf("served %d, want the whole model %d", fh.totalServed(), repo.total())
	}
	// dir auto: the hub's default folder for an engine that loads hub weights.
	env, err = CacheEnv(context.Background(), repo.model, "sglang", config.ModelCache{Dir: "auto", Offline: true})
	if err != nil || env["HF_HUB_CACHE"] != DefaultCacheDir() || env["HF_HUB_OFFLINE"] != "1" {
		t.Fatalf("auto: %v, %v; want HF_HUB_CACHE=%s", env, err, DefaultCacheDir())
	}
	// Present: the hook touches no network, even with the hub gone.
	fh.hub.Close()
	fh.reset()
	if _, err := CacheEnv(context.Background(), repo.model, "vllm", config.ModelCache{Dir: cache, Offline: false}); err != nil {
		t.Fatal(err)
	}
	// A model not in the cache on an offline host: the exact command.
	t.Setenv("HF_HUB_OFFLINE", "1")
	_, err = CacheEnv(context.Background(), "acme/absent", "vllm", config.ModelCache{Dir: cache, Offline: true})
	if err == nil || !strings.Contains(err.Error(), "gpuvet cache pull acme/absent --cache-dir "+cache) {
		t.Fatalf("offline, absent: %v", err)
	}
	// model_cache: off, auto for a generic engine, or a local folder: nothing to do.
	for _, tc := range []struct{ model, kind, dir string }{
		{"acme/x", "vllm", ""}, {"acme/x", "vllm", "off"}, {"acme/x", "generic", "auto"}, {t.TempDir(), "vllm", cache},
	} {
		if env, err := CacheEnv(context.Background(), tc.model, tc.kind, config.ModelCache{Dir: tc.dir}); err != nil || len(env) != 0 {
			t.Fatalf("CacheEnv(%q, %s, dir %q) = %v, %v; want nothing", tc.model, tc.kind, tc.dir, env, err)
		}
	}
	if _, note := Dir(config.ModelCache{Dir: "auto"}, "generic"); !strings.Contains(note, "generic") {
		t.Errorf("auto for generic needs a note saying why there is no cache: %q", note)
	}
}

// TestNoTreeAPI pulls from a hub proxy that has no tree API: the listing comes from the revision's
// siblings plus a HEAD per file (X-Linked-Etag/X-Linked-Size for LFS, ETag for the rest).
func TestNoTreeAPI(t *testing.T) {
	cache := isolate(t)
	repo := testModel("acme/proxy", 14)
	fh := newFakeHub(t, repo)
	fh.mu.Lock()
	fh.noTree = true
	fh.mu.Unlock()
	s, err := Pull(context.Background(), repo.model, opts(fh, cache))
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, repo, s)
	if fh.count("head resolve") != len(repo.files) || fh.count("tree") != 1 {
		t.Fatalf("%d HEADs, %d tree calls; want one HEAD per file and the one failed tree call", fh.count("head resolve"), fh.count("tree"))
	}
	if err := Verify(cache, repo.model); err != nil {
		t.Fatal(err)
	}
}

// TestStalledBody: a body that stops sending is cut by the stall watchdog and resumed.
func TestStalledBody(t *testing.T) {
	cache := isolate(t)
	repo := testModel("acme/stall", 15)
	fh := newFakeHub(t, repo)
	big := "model-00001-of-00002.safetensors"
	fh.mu.Lock()
	fh.hang = map[string]int64{big: 512 << 10}
	fh.mu.Unlock()
	o := opts(fh, cache)
	o.stall = 300 * time.Millisecond
	s, err := Pull(context.Background(), repo.model, o)
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, repo, s)
	// One resume after the stall; on a loaded machine (-race, shared CI) the 300 ms watchdog may
	// cut a slow stretch again, and each of those must be a resume too.
	r := fh.rangesOf(big)
	if len(r) < 2 || r[0] != "" {
		t.Fatalf("stalled file requests %q: want a resume after the stall", r)
	}
	for _, rg := range r[1:] {
		if !strings.HasPrefix(rg, "bytes=") || rg == "bytes=0-" {
			t.Fatalf("stalled file requests %q: want every request after the stall to resume", r)
		}
	}
}

// TestNewCommitSharesBlobs: a new commit that changes one file downloads only that file; the
// unchanged blobs are shared by both snapshots, and refs/main moves to the new commit.
func TestNewCommitSharesBlobs(t *testing.T) {
	cache := isolate(t)
	repo := testModel("acme/evolving", 16)
	fh := newFakeHub(t, repo)
	if _, err := Pull(context.Background(), repo.model, opts(fh, cache)); err != nil {
		t.Fatal(err)
	}
	old := repo.commit
	fh.mu.Lock()
	repo.commit = strings.Repeat("c", 40)
	repo.files["config.json"] = []byte(`{"hidden_size":128}`)
	fh.mu.Unlock()
	fh.reset()
	s, err := Pull(context.Background(), repo.model, opts(fh, cache))
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cache, repo, s)
	if fh.totalServed() != int64(len(repo.files["config.json"])) {
		t.Fatalf("new commit: served %d bytes, want only the changed config.json", fh.totalServed())
	}
	snaps, _ := List(cache)
	if len(snaps) != 2 || snaps[0].Commit != old && snaps[1].Commit != old {
		t.Fatalf("want both commits listed: %+v", snaps)
	}
	// The old revision stays usable by commit, offline.
	o := opts(fh, cache)
	o.Revision, o.Offline = old, true
	if _, err := Ensure(context.Background(), repo.model, o); err != nil {
		t.Fatal(err)
	}
}

// TestToFetchCountsOnlyMissingBlobs: a new commit whose files are mostly blobs the cache already
// holds (another snapshot's), or two paths of one blob, needs only the bytes of blobs not there:
// the free-space check and the progress bar must not count the whole model again.
func TestToFetchCountsOnlyMissingBlobs(t *testing.T) {
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	have := File{Path: "model.safetensors", Size: 1000, Blob: strings.Repeat("a", 64), LFS: true}
	if err := os.WriteFile(blobPath(repo, have.Blob), make([]byte, have.Size), 0o644); err != nil {
		t.Fatal(err)
	}
	part := File{Path: "b.safetensors", Size: 300, Blob: strings.Repeat("b", 64), LFS: true}
	if err := os.WriteFile(blobPath(repo, part.Blob)+".incomplete", make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	twin := part
	twin.Path = "copy/b.safetensors"
	cfg := File{Path: "config.json", Size: 20, Blob: strings.Repeat("c", 40)}
	need, partial := toFetch(repo, []File{have, part, twin, cfg})
	if need != 320 || partial != 100 {
		t.Fatalf("toFetch = need %d, partial %d; want 320 (b once, config) and 100", need, partial)
	}
}

// TestRedirectLoopErrorHidesCredentials: a hub endpoint with credentials in its URL (a mirror
// behind basic auth) that redirects without end fails with an error that does not print them.
func TestRedirectLoopErrorHidesCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path+"x", http.StatusFound)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("mirror", "s3cret-pass")
	h, err := newHub(u.String(), "")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = h.do(context.Background(), http.MethodGet, h.url("/api/models/a/b"), nil)
	if err == nil || strings.Contains(err.Error(), "s3cret-pass") || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("redirect loop: %v", err)
	}
}
