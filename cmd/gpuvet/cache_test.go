package main

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// tinyHub serves one model with one small file in the hub's API shapes.
func tinyHub(t *testing.T, served *atomic.Int64) *httptest.Server {
	content := []byte(`{"model_type":"llama"}`)
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	oid := hex.EncodeToString(h.Sum(nil))
	commit := strings.Repeat("ab", 20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/models/acme/cli/revision/main":
			fmt.Fprintf(w, `{"id":"acme/cli","sha":%q,"siblings":[{"rfilename":"config.json"}]}`, commit)
		case "/api/models/acme/cli/tree/" + commit:
			fmt.Fprintf(w, `[{"type":"file","oid":%q,"size":%d,"path":"config.json"}]`, oid, len(content))
		case "/acme/cli/resolve/" + commit + "/config.json":
			w.Header().Set("ETag", `"`+oid+`"`)
			n, _ := w.Write(content)
			served.Add(int64(n))
		default:
			w.Header().Set("X-Error-Code", "RepoNotFound")
			http.Error(w, "not found", 404)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCacheCLI(t *testing.T) {
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("HF_HOME", t.TempDir())
	var served atomic.Int64
	srv := tinyHub(t, &served)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"cache", "pull", "bad--name", "--cache-dir", dir}, exitBadUsage},
		{[]string{"cache", "pull", "acme/cli", "--workers", "0", "--cache-dir", dir}, exitBadUsage},
		{[]string{"cache", "pull", "acme/cli", "--include", "[", "--cache-dir", dir, "--endpoint", srv.URL}, exitFailed}, // "[" is a literal: matches nothing
		{[]string{"cache", "pull", "acme/none", "--cache-dir", dir, "--endpoint", srv.URL}, exitFailed},
		{[]string{"cache", "pull", "acme/cli", "--cache-dir", dir, "--endpoint", srv.URL}, exitOK},
		{[]string{"cache", "pull", "acme/cli", "--cache-dir", dir, "--endpoint", srv.URL}, exitOK},
		{[]string{"cache", "ls", "--cache-dir", dir}, exitOK},
		{[]string{"cache", "verify", "--cache-dir", dir}, exitOK},
		{[]string{"cache", "verify", "acme/cli", "--cache-dir", dir}, exitOK},
		{[]string{"cache", "verify", "acme/other", "--cache-dir", dir}, exitFailed},
	} {
		if got := execute(tc.args); got != tc.code {
			t.Errorf("gpuvet %s: exit %d, want %d", strings.Join(tc.args, " "), got, tc.code)
		}
	}
	if served.Load() != int64(len(`{"model_type":"llama"}`)) {
		t.Fatalf("two pulls served %d bytes, want one file's worth", served.Load())
	}
	link := filepath.Join(dir, "models--acme--cli", "snapshots", strings.Repeat("ab", 20), "config.json")
	if b, err := os.ReadFile(link); err != nil || string(b) != `{"model_type":"llama"}` {
		t.Fatalf("%s: %q %v", link, b, err)
	}
}
