package modelcache

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHub is a Hugging Face-compatible hub for tests, on loopback: the revision and tree APIs, the
// resolve endpoint (small files served directly, LFS files redirected to a second "CDN" server), the
// hub's headers, and fault injection per file (429 + Retry-After, a connection cut mid-body, a
// server that ignores Range, corrupt bytes, slow bodies).
type fakeHub struct {
	t        *testing.T
	hub, cdn *httptest.Server
	token    string // the token the hub accepts for gated repos
	pageSize int    // tree page size (Link: rel="next" paging)
	noTree   bool   // answer the tree API with a bare 404, as a proxy without it would

	mu          sync.Mutex
	repos       map[string]*fakeRepo
	served      map[string]int64 // repo file path -> body bytes written
	ranges      map[string][]string
	calls       map[string]int // "revision", "tree", "resolve", "cdn"
	cdnAuth     []string       // Authorization headers the CDN saw (must stay empty)
	throttle    map[string]int // path -> 429s left
	cut         map[string]int64
	ignoreRange map[string]bool
	corrupt     map[string]bool
	hang        map[string]int64 // path -> stop sending (without closing) after this many bytes, once
	slow        map[string]time.Duration
	onBytes     func(path string, served int64) // called after each chunk of a slow body
	active      sync.WaitGroup                  // bodies being served
}

func (fh *fakeHub) rangesOf(p string) []string {
	fh.mu.Lock()
	defer fh.mu.Unlock()
	return append([]string(nil), fh.ranges[p]...)
}

func (fh *fakeHub) servedOf(p string) int64 {
	fh.mu.Lock()
	defer fh.mu.Unlock()
	return fh.served[p]
}

// quiesce waits until no body is being served (a killed client's handler notices and returns).
func (fh *fakeHub) quiesce() {
	done := make(chan struct{})
	go func() { fh.active.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fh.t.Fatal("the test hub is still serving a body 10s after its client went away")
	}
}

type fakeRepo struct {
	model, commit, branch string
	gated                 bool
	files                 map[string][]byte
	lfs                   map[string]bool
}

func gitBlobSHA1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func sha256hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// testModel is a multi-file model: two LFS shards, small JSON files, a nested path.
func testModel(model string, seed uint64) *fakeRepo {
	return &fakeRepo{
		model:  model,
		commit: fmt.Sprintf("%040x", seed*7919+1),
		branch: "main",
		files: map[string][]byte{
			"config.json":                      []byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":64}`),
			"tokenizer.json":                   randBytes(seed+1, 200<<10),
			"model-00001-of-00002.safetensors": randBytes(seed+2, 3<<20),
			"model-00002-of-00002.safetensors": randBytes(seed+3, 2<<20),
			"model.safetensors.index.json":     []byte(`{"weight_map":{}}`),
			"sub/dir/extra.txt":                []byte("nested\n"),
			"README.md":                        []byte("# tiny\n"),
		},
		lfs: map[string]bool{"model-00001-of-00002.safetensors": true, "model-00002-of-00002.safetensors": true, "tokenizer.json": true},
	}
}

func (r *fakeRepo) total() (n int64) {
	for _, b := range r.files {
		n += int64(len(b))
	}
	return n
}

func (r *fakeRepo) blobID(p string) string {
	if r.lfs[p] {
		return sha256hex(r.files[p])
	}
	return gitBlobSHA1(r.files[p])
}

func newFakeHub(t *testing.T, repos ...*fakeRepo) *fakeHub {
	fh := &fakeHub{t: t, token: "hf_test_SECRET_token_42", pageSize: 3, repos: map[string]*fakeRepo{}}
	fh.reset()
	for _, r := range repos {
		fh.repos[r.model] = r
	}
	fh.cdn = httptest.NewServer(http.HandlerFunc(fh.serveCDN))
	// The hub listens on "localhost" and the CDN on 127.0.0.1, so they are different hosts even to a
	// client that ignores ports.
	fh.hub = httptest.NewUnstartedServer(http.HandlerFunc(fh.serveHub))
	fh.hub.Start()
	t.Cleanup(fh.hub.Close)
	t.Cleanup(fh.cdn.Close)
	return fh
}

func (fh *fakeHub) endpoint() string {
	return strings.Replace(fh.hub.URL, "127.0.0.1", "localhost", 1)
}

// reset clears counters and faults (between the phases of a test).
func (fh *fakeHub) reset() {
	fh.mu.Lock()
	defer fh.mu.Unlock()
	fh.served, fh.ranges, fh.calls = map[string]int64{}, map[string][]string{}, map[string]int{}
	fh.cdnAuth = nil
	fh.throttle, fh.cut, fh.ignoreRange = map[string]int{}, map[string]int64{}, map[string]bool{}
	fh.corrupt, fh.slow, fh.hang = map[string]bool{}, map[string]time.Duration{}, map[string]int64{}
	fh.onBytes = nil
}

func (fh *fakeHub) totalServed() (n int64) {
	fh.mu.Lock()
	defer fh.mu.Unlock()
	for _, v := range fh.served {
		n += v
	}
	return n
}

func (fh *fakeHub) count(kind string) int {
	fh.mu.Lock()
	defer fh.mu.Unlock()
	return fh.calls[kind]
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	http.Error(w, msg, status)
}

func (fh *fakeHub) authorized(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+fh.token
}

// findRepo splits "org/name/rest" or "name/rest" into a known repo and the rest of the path.
func (fh *fakeHub) findRepo(p string) (*fakeRepo, string) {
	fh.mu.Lock()
	defer fh.mu.Unlock()
	parts := strings.SplitN(p, "/", 3)
	if len(parts) >= 2 {
		if r := fh.repos[parts[0]+"/"+parts[1]]; r != nil {
			if len(parts) == 3 {
				return r, parts[2]
			}
			return r, ""
		}
	}
	if r := fh.repos[parts[0]]; r != nil {
		_, rest, _ := strings.Cut(p, "/")
		return r, rest
	}
	return nil, ""
}

func (fh *fakeHub) serveHub(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/models/"); ok {
		fh.serveAPI(w, r, rest)
		return
	}
	repo, rest := fh.findRepo(strings.TrimPrefix(r.URL.Path, "/"))
	if repo == nil {
		hubError(w, 404, "RepoNotFound", "Repository not found")
		return
	}
	rev, path, ok := strings.Cut(strings.TrimPrefix(rest, "resolve/"), "/")
	if !ok || !strings.HasPrefix(rest, "resolve/") {
		hubError(w, 404, "", "not found")
		return
	}
	fh.mu.Lock()
	fh.calls[strings.ToLower(r.Method)+" resolve"]++
	if r.Method == http.MethodGet {
		fh.calls["resolve"]++
	}
	fh.mu.Unlock()
	if repo.gated && !fh.authorized(r) {
		if r.Header.Get("Authorization") == "" {
			hubError(w, 401, "GatedRepo", "Access to model "+repo.model+" is restricted. You must be authenticated to access it.")
		} else {
			hubError(w, 403, "GatedRepo", "Access to model "+repo.model+" is restricted and you are not in the authorized list.")
		}
		return
	}
	if rev != repo.commit && rev != repo.branch {
		hubError(w, 404, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	content, ok := repo.files[path]
	if !ok {
		hubError(w, 404, "EntryNotFound", path+" does not exist")
		return
	}
	w.Header().Set("X-Repo-Commit", repo.commit)
	if repo.lfs[path] {
		w.Header().Set("X-Linked-Etag", `"`+sha256hex(content)+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(content)))
		w.Header().Set("ETag", `"`+gitBlobSHA1([]byte("pointer "+path))+`"`)
		w.Header().Set("Location", fh.cdn.URL+"/repos/"+repo.model+"/"+sha256hex(content)+"?path="+path)
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+gitBlobSHA1(content)+`"`)
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Length", strconv.Itoa(len(content)))
		return
	}
	fh.serveBody(w, r, path, content)
}

func (fh *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	fh.mu.Lock()
	fh.calls["cdn"]++
	if a := r.Header.Get("Authorization"); a != "" {
		fh.cdnAuth = append(fh.cdnAuth, a)
	}
	fh.mu.Unlock()
	rest := strings.TrimPrefix(r.URL.Path, "/repos/")
	repo, _ := fh.findRepo(rest)
	path := r.URL.Query().Get("path")
	if repo == nil || repo.files[path] == nil {
		http.Error(w, "no such object", 404)
		return
	}
	fh.serveBody(w, r, path, repo.files[path])
}

func (fh *fakeHub) serveAPI(w http.ResponseWriter, r *http.Request, rest string) {
	repo, tail := fh.findRepo(rest) // tail: kind/rev
	if repo == nil {
		hubError(w, 404, "RepoNotFound", "Repository not found")
		return
	}
	kind, rev, ok := strings.Cut(tail, "/")
	if !ok {
		hubError(w, 404, "", "bad api path")
		return
	}
	rev = strings.ReplaceAll(rev, "%2F", "/")
	if rev != repo.commit && rev != repo.branch {
		hubError(w, 404, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	paths := make([]string, 0, len(repo.files))
	for p := range repo.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	w.Header().Set("Content-Type", "application/json")
	switch kind {
	case "revision":
		fh.mu.Lock()
		fh.calls["revision"]++
		fh.mu.Unlock()
		var sib []map[string]string
		for _, p := range paths {
			sib = append(sib, map[string]string{"rfilename": p})
		}
		gated := any(false)
		if repo.gated {
			gated = "manual"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"_id": "x", "id": repo.model, "sha": repo.commit,
			"gated": gated, "private": false, "siblings": sib, "lastModified": "2026-01-01T00:00:00.000Z"})
	case "tree":
		fh.mu.Lock()
		fh.calls["tree"]++
		fh.mu.Unlock()
		if fh.noTree {
			http.Error(w, "404 page not found", 404)
			return
		}
		if r.URL.Query().Get("recursive") != "true" {
			hubError(w, 400, "", "test hub expects recursive=true")
			return
		}
		// The hub lists directories too; gpuvet must skip them.
		entries := []map[string]any{{"type": "directory", "oid": gitBlobSHA1([]byte("d")), "size": 0, "path": "sub"}}
		for _, p := range paths {
			e := map[string]any{"type": "file", "size": len(repo.files[p]), "path": p, "oid": gitBlobSHA1(repo.files[p])}
			if repo.lfs[p] {
				e["oid"] = gitBlobSHA1([]byte("pointer " + p))
				e["size"] = len(repo.files[p])
				e["lfs"] = map[string]any{"oid": sha256hex(repo.files[p]), "size": len(repo.files[p]), "pointerSize": 134}
			}
			entries = append(entries, e)
		}
		start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		end := min(start+fh.pageSize, len(entries))
		if end < len(entries) {
			next := *r.URL
			q := next.Query()
			q.Set("cursor", strconv.Itoa(end))
			next.RawQuery = q.Encode()
			w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, fh.endpoint(), next.RequestURI()))
		}
		_ = json.NewEncoder(w).Encode(entries[start:end])
	default:
		hubError(w, 404, "", "unknown api")
	}
}

// serveBody sends content (or the asked range) with the faults configured for path.
func (fh *fakeHub) serveBody(w http.ResponseWriter, r *http.Request, path string, content []byte) {
	fh.active.Add(1)
	defer fh.active.Done()
	fh.mu.Lock()
	rng := r.Header.Get("Range")
	fh.ranges[path] = append(fh.ranges[path], rng)
	if fh.throttle[path] > 0 {
		fh.throttle[path]--
		fh.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		hubError(w, 429, "", "Too Many Requests")
		return
	}
	cutAt, cut := fh.cut[path]
	delete(fh.cut, path)
	hangAt, hang := fh.hang[path]
	delete(fh.hang, path)
	ignore, corrupt, slow, hook := fh.ignoreRange[path], fh.corrupt[path], fh.slow[path], fh.onBytes
	fh.mu.Unlock()

	body := content
	if corrupt {
		body = append([]byte(nil), content...)
		body[len(body)/2] ^= 0xff
	}
	status := http.StatusOK
	if start, ok := strings.CutPrefix(rng, "bytes="); ok && !ignore {
		from, err := strconv.Atoi(strings.TrimSuffix(start, "-"))
		if err != nil || from >= len(body) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(body)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(body)-1, len(body)))
		body, status = body[from:], http.StatusPartialContent
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Accept-Ranges", "bytes")
	w.WriteHeader(status)
	fl := w.(http.Flusher)
	chunk := 64 << 10
	var sent int64
	for len(body) > 0 {
		n := min(chunk, len(body))
		if cut && sent+int64(n) > cutAt {
			n = int(cutAt - sent)
		}
		if hang && sent+int64(n) > hangAt {
			n = int(hangAt - sent)
		}
		m, err := w.Write(body[:n])
		sent += int64(m)
		fh.mu.Lock()
		fh.served[path] += int64(m)
		total := fh.served[path]
		fh.mu.Unlock()
		fl.Flush()
		if err != nil {
			return
		}
		if cut && sent >= cutAt {
			panic(http.ErrAbortHandler) // drop the connection mid-body
		}
		if hang && sent >= hangAt {
			<-r.Context().Done() // keep the connection open, send nothing
			return
		}
		body = body[n:]
		if hook != nil {
			hook(path, total)
		}
		if slow > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(slow):
			}
		}
	}
}
