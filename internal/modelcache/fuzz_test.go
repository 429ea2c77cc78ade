package modelcache

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The hub's answers are outside input: every parser must reject what it cannot use with an error,
// never panic, and never accept a path that escapes the snapshot folder.

func FuzzParseTree(f *testing.F) {
	f.Add([]byte(`[{"type":"file","oid":"` + strings.Repeat("a", 40) + `","size":12,"path":"config.json"}]`))
	f.Add([]byte(`[{"type":"file","oid":"` + strings.Repeat("b", 40) + `","size":5,"path":"m.safetensors","lfs":{"oid":"` + strings.Repeat("c", 64) + `","size":99,"pointerSize":134}}]`))
	f.Add([]byte(`[{"type":"directory","oid":"x","size":0,"path":"sub"}]`))
	f.Add([]byte(`[{"type":"file","oid":"` + strings.Repeat("a", 40) + `","size":1,"path":"../../etc/passwd"}]`))
	f.Add([]byte(`{"error":"nope"}`))
	f.Add([]byte(`[{"type":"file","size":-1}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := parseTree(b)
		if err != nil {
			return
		}
		for _, fl := range files {
			if fl.Size < 0 || (fl.LFS && !sha256Re.MatchString(fl.Blob)) || (!fl.LFS && !commitRe.MatchString(fl.Blob)) {
				t.Fatalf("accepted a bad entry %+v", fl)
			}
			root := filepath.Join("/cache", "snapshots", "c")
			p := filepath.Join(root, filepath.FromSlash(fl.Path))
			if !strings.HasPrefix(p, root+string(filepath.Separator)) {
				t.Fatalf("path %q escapes the snapshot: %s", fl.Path, p)
			}
		}
	})
}

func FuzzParseRevision(f *testing.F) {
	f.Add([]byte(`{"id":"acme/m","sha":"` + strings.Repeat("0", 40) + `","gated":false,"siblings":[{"rfilename":"config.json"}]}`))
	f.Add([]byte(`{"id":"acme/m","sha":"` + strings.Repeat("1", 40) + `","gated":"manual"}`))
	f.Add([]byte(`{"sha":"main"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRevision(b)
		if err != nil {
			return
		}
		if !commitRe.MatchString(r.SHA) {
			t.Fatalf("accepted sha %q", r.SHA)
		}
		_ = r.gated()
	})
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "120", "-3", "", "Wed, 21 Oct 2015 07:28:00 GMT", "soon", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := retryAfter(s, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("retryAfter(%q) = %v, %v", s, d, ok)
		}
		if w := defaultRetry.backoff(1, d, ok); w < 0 || w > defaultRetry.maxRetryAfter {
			t.Fatalf("wait %v for Retry-After %q outside [0, %v]", w, s, defaultRetry.maxRetryAfter)
		}
	})
}

func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/100", "bytes 10-99/*", "bytes 5-1/10", "bytes */100", "items 0-1/2", "bytes 0-99/99"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, end, total, err := parseContentRange(s)
		if err != nil {
			return
		}
		if start < 0 || end < start || (total != -1 && total <= end) {
			t.Fatalf("parseContentRange(%q) = %d, %d, %d", s, start, end, total)
		}
	})
}

func FuzzHeaders(f *testing.F) {
	f.Add(`<https://huggingface.co/api/models/a/b/tree/main?cursor=x>; rel="next"`, `W/"abc"`)
	f.Add(`<a>; rel=prev, <b>; rel="next"`, `"`+strings.Repeat("a", 64)+`"`)
	f.Add(`garbage`, ``)
	f.Fuzz(func(t *testing.T, link, etag string) {
		if n := nextLink(link); n != "" && !strings.Contains(link, "<"+n+">") {
			t.Fatalf("nextLink(%q) = %q, not one of its targets", link, n)
		}
		e := normalizeETag(etag)
		if strings.HasPrefix(e, `"`) || strings.HasSuffix(e, `"`) {
			t.Fatalf("normalizeETag(%q) = %q keeps quotes", etag, e)
		}
	})
}

func FuzzGlob(f *testing.F) {
	for _, s := range []string{"*.safetensors", "sub/", "[!a]*", "[", "a?c", `\`, "[]]", "[^x]"} {
		f.Add(s, "sub/a.safetensors")
	}
	f.Fuzz(func(t *testing.T, pat, path string) {
		g, err := compileGlobs([]string{pat})
		if err != nil {
			return
		}
		_ = g.match(path)
		if !strings.ContainsAny(pat, "*?[") && !strings.HasSuffix(pat, "/") && g.match(path) != (pat == path) {
			t.Fatalf("literal pattern %q vs %q: match %v", pat, path, g.match(path))
		}
	})
}

func FuzzValidateModelAndRevision(f *testing.F) {
	for _, s := range []string{"acme/m", "gpt2", "a/b/c", "../x", "a--b/c", "-a/b", "refs/pr/1", "..", "v1.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateModel(s) == nil {
			dir := repoDir("/cache", s)
			if filepath.Dir(dir) != "/cache" || !strings.HasPrefix(filepath.Base(dir), "models--") {
				t.Fatalf("model %q maps outside the cache: %s", s, dir)
			}
			if m, ok := modelFromDir(filepath.Base(dir)); !ok || m != s {
				t.Fatalf("model %q does not round-trip: %q", s, m)
			}
		}
		if validateRevision(s) == nil {
			p := refPath("/cache/models--a", s)
			if !strings.HasPrefix(p, "/cache/models--a/refs/") {
				t.Fatalf("revision %q escapes refs/: %s", s, p)
			}
		}
	})
}

func FuzzFileFromHead(f *testing.F) {
	f.Add(`"`+strings.Repeat("a", 64)+`"`, "", "123", int64(5))
	f.Add("", `W/"`+strings.Repeat("b", 40)+`"`, "", int64(7))
	f.Add("", "nginx-5f3a", "-1", int64(-1))
	f.Fuzz(func(t *testing.T, linked, etag, size string, cl int64) {
		h := http.Header{}
		h.Set("X-Linked-Etag", linked)
		h.Set("ETag", etag)
		h.Set("X-Linked-Size", size)
		fl, err := fileFromHead("m.safetensors", h, cl)
		if err != nil {
			return
		}
		if fl.validate() != nil {
			t.Fatalf("accepted %+v from linked=%q etag=%q size=%q cl=%d", fl, linked, etag, size, cl)
		}
	})
}
