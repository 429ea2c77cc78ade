package modelcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// treeUnsupported reports a hub that has no tree API (a proxy answering 400/404/405/501 without
// the hub's RepoNotFound/RevisionNotFound codes), as opposed to a repo or revision that is absent.
func treeUnsupported(err error) bool {
	var he *HubError
	if !errors.As(err, &he) {
		return false
	}
	switch he.Code {
	case "RepoNotFound", "RevisionNotFound", "GatedRepo":
		return false
	}
	switch he.Status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return true
	}
	return false
}

// headAll lists every file of the revision's siblings with its hash and size from a HEAD on its
// resolve URL (the way the hub libraries learn a file's etag). All of them, not only those --include
// selects: the listing is kept as the commit's manifest, which must be complete.
func (h *hub) headAll(ctx context.Context, model, commit string, info *revisionInfo, c *pullConfig) ([]File, error) {
	var paths []string
	for _, s := range info.Siblings {
		if err := validateRepoPath(s.RFilename); err != nil {
			return nil, fmt.Errorf("revision %s of %s: sibling %w", c.Revision, model, err)
		}
		paths = append(paths, s.RFilename)
	}
	out := make([]File, len(paths))
	errs := make([]error, len(paths))
	sem := make(chan struct{}, c.Workers)
	var wg sync.WaitGroup
	for i, p := range paths {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i], errs[i] = h.head(ctx, model, commit, p)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// head asks the hub for one file's blob id and size: X-Linked-Etag/X-Linked-Size on an LFS
// redirect, else ETag/Content-Length. It never follows the redirect to the CDN.
func (h *hub) head(ctx context.Context, model, commit, path string) (File, error) {
	what := fmt.Sprintf("file %s of %s", path, model)
	var f File
	err := h.withRetry(ctx, what, func() (bool, error) {
		resp, _, err := h.doNoFollow(ctx, http.MethodHead, h.resolveURL(model, commit, path))
		if err != nil {
			return false, netError(ctx, what, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 400 {
			return false, h.answerError(resp, model, what)
		}
		f, err = fileFromHead(path, resp.Header, resp.ContentLength)
		return false, err
	})
	if err != nil {
		return File{}, err
	}
	if err := f.validate(); err != nil {
		return File{}, fmt.Errorf("%s: %w", what, err)
	}
	return f, nil
}

// fileFromHead reads a resolve answer's headers into a File.
func fileFromHead(path string, hdr http.Header, contentLength int64) (File, error) {
	etag := cmp.Or(normalizeETag(hdr.Get("X-Linked-Etag")), normalizeETag(hdr.Get("ETag")))
	size := contentLength
	if s := hdr.Get("X-Linked-Size"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return File{}, fmt.Errorf("file %s: X-Linked-Size %q is not a size", path, s)
		}
		size = n
	}
	if size < 0 {
		return File{}, fmt.Errorf("file %s: the hub sent no size (X-Linked-Size or Content-Length)", path)
	}
	switch {
	case sha256Re.MatchString(etag):
		return File{Path: path, Size: size, Blob: etag, LFS: true}, nil
	case commitRe.MatchString(etag):
		return File{Path: path, Size: size, Blob: etag}, nil
	}
	return File{}, fmt.Errorf("file %s: the hub's ETag %q is neither a SHA-256 nor a git blob SHA-1, so the download could not be verified; use a Hugging Face-compatible endpoint", path, etag)
}
