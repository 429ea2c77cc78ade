package modelcache

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// File is one file of a snapshot: its path in the repo, size, and the blob id naming its content
// (the SHA-256 for LFS files, the git blob SHA-1 for the others: the hub's ETag either way).
type File struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Blob string `json:"blob"`
	LFS  bool   `json:"lfs,omitempty"`
}

func (f File) validate() error {
	if err := validateRepoPath(f.Path); err != nil {
		return err
	}
	if f.Size < 0 {
		return fmt.Errorf("file %q: size %d is negative", f.Path, f.Size)
	}
	if f.LFS && !sha256Re.MatchString(f.Blob) {
		return fmt.Errorf("file %q: LFS oid %q is not a 64-hex SHA-256", f.Path, f.Blob)
	}
	if !f.LFS && !commitRe.MatchString(f.Blob) {
		return fmt.Errorf("file %q: oid %q is not a 40-hex git blob SHA-1", f.Path, f.Blob)
	}
	return nil
}

// newHasher returns the hash whose hex digest names f's blob: SHA-256 of the content for LFS files,
// the git blob id sha1("blob <len>\0" + content) for the others.
func newHasher(f File) hash.Hash {
	if f.LFS {
		return sha256.New()
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", f.Size)
	return h
}

// hashFile hashes the whole file at p as f's blob would be hashed.
func hashFile(p string, f File) (string, error) {
	fh, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := newHasher(f)
	if _, err := io.Copy(h, fh); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// HashMismatchError says a downloaded file is not what the hub's listing promised.
type HashMismatchError struct {
	Model, Path, Want, Got string
}

func (e *HashMismatchError) Error() string {
	return fmt.Sprintf("%s %s: content hash %s, the hub lists %s; the bad download was deleted (not linked into the snapshot): pull again, and if it repeats the hub or a proxy is serving a corrupt file",
		e.Model, e.Path, e.Got, e.Want)
}

// fetcher downloads the files of one snapshot into one repo folder.
type fetcher struct {
	h          *hub
	cacheDir   string
	repo       string
	model      string
	commit     string
	progress   func(n int64) // bytes written (negative when a restart discards bytes)
	downloaded atomic.Int64  // bytes received this run
}

// fetch makes f present in the snapshot: download (resuming blobs/<id>.incomplete), verify, rename
// into blobs/, then link. Concurrent gpuvet processes on the same blob serialise on a lock file.
func (ft *fetcher) fetch(ctx context.Context, f File) error {
	unlock, err := lockBlob(ft.cacheDir, ft.repo, f.Blob)
	if err != nil {
		return diskError(err, ft.model, f, "lock")
	}
	defer unlock()
	blob := blobPath(ft.repo, f.Blob)
	if st, err := os.Stat(blob); err == nil && st.Size() == f.Size {
		return diskError(linkSnapshot(ft.repo, ft.commit, f), ft.model, f, "link")
	}
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return diskError(err, ft.model, f, "create blobs folder")
	}
	inc := blob + ".incomplete"
	d := &download{ft: ft, f: f, inc: inc}
	if err := d.run(ctx); err != nil {
		return err
	}
	if err := os.Chmod(inc, 0o644); err != nil {
		return diskError(err, ft.model, f, "chmod")
	}
	if err := os.Rename(inc, blob); err != nil {
		return diskError(err, ft.model, f, "rename into blobs")
	}
	return diskError(linkSnapshot(ft.repo, ft.commit, f), ft.model, f, "link")
}

// download is the state of one file's transfer across retries: the hasher holds the hash of the
// first `hashed` bytes of the .incomplete file, so a resume after a cut connection needs no re-read.
type download struct {
	ft     *fetcher
	f      File
	inc    string
	hasher hash.Hash
	hashed int64
}

func (d *download) run(ctx context.Context) error {
	what := fmt.Sprintf("download %s of %s", d.f.Path, d.ft.model)
	if err := d.loadPartial(); err != nil {
		return err
	}
	err := d.ft.h.withRetry(ctx, what, func() (bool, error) { return d.attempt(ctx) })
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(d.hasher.Sum(nil)); got != d.f.Blob {
		_ = os.Remove(d.inc)
		return &HashMismatchError{Model: d.ft.model, Path: d.f.Path, Want: d.f.Blob, Got: got}
	}
	return nil
}

// loadPartial hashes what a previous run left in .incomplete (or starts empty).
func (d *download) loadPartial() error {
	d.hasher, d.hashed = newHasher(d.f), 0
	fh, err := os.Open(d.inc)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return diskError(err, d.ft.model, d.f, "open partial file")
	}
	defer fh.Close()
	n, err := io.Copy(d.hasher, io.LimitReader(fh, d.f.Size+1))
	if err != nil {
		return diskError(err, d.ft.model, d.f, "read partial file")
	}
	if n > d.f.Size { // longer than the file can be: not ours to resume
		d.hasher = newHasher(d.f)
		return diskError(os.Truncate(d.inc, 0), d.ft.model, d.f, "truncate partial file")
	}
	d.hashed = n
	return nil
}

// restart discards the partial file (the server ignored Range, or sent a range we did not ask for).
func (d *download) restart(fh *os.File) error {
	if err := fh.Truncate(0); err != nil {
		return diskError(err, d.ft.model, d.f, "truncate partial file")
	}
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		return err
	}
	d.ft.progress(-d.hashed)
	d.hasher, d.hashed = newHasher(d.f), 0
	return nil
}

// attempt makes one GET from the current offset. progress is true when it moved bytes.
func (d *download) attempt(ctx context.Context) (progress bool, err error) {
	if d.hashed == d.f.Size && d.f.Size > 0 {
		return false, nil
	}
	fh, err := os.OpenFile(d.inc, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return false, diskError(err, d.ft.model, d.f, "open partial file")
	}
	defer fh.Close()
	// The file may hold bytes beyond what was hashed (a write that failed half way): cut them.
	if err := fh.Truncate(d.hashed); err != nil {
		return false, diskError(err, d.ft.model, d.f, "truncate partial file")
	}
	if _, err := fh.Seek(d.hashed, io.SeekStart); err != nil {
		return false, err
	}
	if d.f.Size == 0 {
		return false, nil // nothing to fetch; the empty content's hash is checked by run
	}

	// The per-attempt context is cancelled by the stall watchdog when the body stops flowing.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	stalled := &atomic.Bool{}
	watchdog := time.AfterFunc(d.ft.h.stall, func() { stalled.Store(true); cancel() })
	defer watchdog.Stop()

	hdr := http.Header{}
	if d.hashed > 0 {
		hdr.Set("Range", "bytes="+strconv.FormatInt(d.hashed, 10)+"-")
	}
	what := fmt.Sprintf("file %s of %s", d.f.Path, d.ft.model)
	resp, hubHdr, err := d.ft.h.do(actx, http.MethodGet, d.ft.h.resolveURL(d.ft.model, d.ft.commit, d.f.Path), hdr)
	if err != nil {
		if stalled.Load() {
			err = errStalled
		}
		return false, netError(ctx, what, err)
	}
	defer resp.Body.Close()
	if err := d.checkHeaders(hubHdr); err != nil {
		return false, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if d.hashed > 0 { // the server ignored Range: start over from byte 0
			if err := d.restart(fh); err != nil {
				return false, err
			}
		}
	case http.StatusPartialContent:
		start, _, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || start != d.hashed || (total >= 0 && total != d.f.Size) {
			// Not the range we asked for: drop the partial file and ask for everything.
			if rerr := d.restart(fh); rerr != nil {
				return false, rerr
			}
			return false, &retryableErr{err: fmt.Errorf("%s: unexpected Content-Range %q for offset %d", what, resp.Header.Get("Content-Range"), d.hashed)}
		}
	case http.StatusRequestedRangeNotSatisfiable:
		if err := d.restart(fh); err != nil {
			return false, err
		}
		return false, &retryableErr{err: fmt.Errorf("%s: the hub refused to resume at byte %d (416)", what, d.hashed)}
	default:
		return false, d.ft.h.answerError(resp, d.ft.model, what)
	}
	return d.copyBody(ctx, fh, resp.Body, watchdog, stalled)
}

// checkHeaders compares what the hub's resolve answer says about the file with the listing: a
// mismatch means the repo changed under us or the listing is wrong, and the download would not verify.
func (d *download) checkHeaders(h http.Header) error {
	if h == nil {
		return nil
	}
	if c := h.Get("X-Repo-Commit"); c != "" && c != d.ft.commit {
		return fmt.Errorf("file %s of %s: hub serves commit %s, expected %s", d.f.Path, d.ft.model, c, d.ft.commit)
	}
	etag := normalizeETag(h.Get("X-Linked-Etag"))
	if etag == "" && !d.f.LFS {
		etag = normalizeETag(h.Get("ETag"))
	}
	// Only a hash-shaped etag is compared (a plain web server's ETag is something else).
	if (sha256Re.MatchString(etag) || commitRe.MatchString(etag)) && etag != d.f.Blob {
		return fmt.Errorf("file %s of %s: hub's etag is %s but its file list says %s; pull again (the repo may have changed)", d.f.Path, d.ft.model, etag, d.f.Blob)
	}
	if s := h.Get("X-Linked-Size"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n != d.f.Size {
			return fmt.Errorf("file %s of %s: hub's X-Linked-Size is %d but its file list says %d", d.f.Path, d.ft.model, n, d.f.Size)
		}
	}
	return nil
}

// copyBody appends the body to the partial file, hashing exactly the bytes that reached the file.
func (d *download) copyBody(ctx context.Context, fh *os.File, body io.Reader, watchdog *time.Timer, stalled *atomic.Bool) (bool, error) {
	what := fmt.Sprintf("file %s of %s", d.f.Path, d.ft.model)
	buf := make([]byte, 1<<20)
	var moved int64
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			watchdog.Reset(d.ft.h.stall)
			if d.hashed+int64(n) > d.f.Size {
				_ = d.restart(fh)
				return moved > 0, fmt.Errorf("%s: the hub sent more than the listed %d bytes", what, d.f.Size)
			}
			w, werr := fh.Write(buf[:n])
			d.hasher.Write(buf[:w])
			d.hashed += int64(w)
			moved += int64(w)
			d.ft.downloaded.Add(int64(w))
			d.ft.progress(int64(w))
			if werr != nil {
				return moved > 0, diskError(werr, d.ft.model, d.f, "write")
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if stalled.Load() {
				rerr = errStalled
			}
			if transient(ctx, rerr) {
				return moved > 0, &retryableErr{err: fmt.Errorf("%s: cut at byte %d of %d: %w", what, d.hashed, d.f.Size, rerr)}
			}
			return moved > 0, fmt.Errorf("%s: %w (partial file kept for resume)", what, rerr)
		}
	}
	if d.hashed != d.f.Size {
		return moved > 0, &retryableErr{err: fmt.Errorf("%s: body ended at byte %d of %d", what, d.hashed, d.f.Size)}
	}
	if err := fh.Sync(); err != nil {
		return true, diskError(err, d.ft.model, d.f, "sync")
	}
	return true, nil
}

// parseContentRange reads "bytes start-end/total" (total -1 when "*").
func parseContentRange(v string) (start, end, total int64, err error) {
	bad := fmt.Errorf("Content-Range %q: expected bytes START-END/TOTAL", v)
	rest, okPrefix := strings.CutPrefix(strings.TrimSpace(v), "bytes ")
	rng, tot, okTotal := strings.Cut(rest, "/")
	s, e, okRange := strings.Cut(rng, "-")
	if !okPrefix || !okTotal || !okRange {
		return 0, 0, 0, bad
	}
	if start, err = strconv.ParseInt(s, 10, 64); err != nil || start < 0 {
		return 0, 0, 0, bad
	}
	if end, err = strconv.ParseInt(e, 10, 64); err != nil || end < start {
		return 0, 0, 0, bad
	}
	if tot == "*" {
		return start, end, -1, nil
	}
	if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total <= end {
		return 0, 0, 0, bad
	}
	return start, end, total, nil
}

// normalizeETag strips the weak marker and quotes: W/"abc" -> abc.
func normalizeETag(v string) string {
	v = strings.TrimSpace(v)
	v = strings.TrimPrefix(v, "W/")
	return strings.Trim(v, `"`)
}

// diskError names the local failure and says what to do; nil stays nil.
func diskError(err error, model string, f File, op string) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%s %s: %s: disk full (%w); free space in the cache folder or use --cache-dir on a larger disk, then pull again: the partial file is kept and the download resumes", model, f.Path, op, err)
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%s %s: %s: permission denied (%w); make the cache folder writable or choose another with --cache-dir", model, f.Path, op, err)
	}
	return fmt.Errorf("%s %s: %s: %w", model, f.Path, op, err)
}
