package modelcache

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
)

// The on-disk layout is the Hugging Face hub cache, so engines read it as is with HF_HUB_OFFLINE=1:
//
//	<cache>/models--org--name/blobs/<sha256 or git-sha1>          file content, named by its hash
//	<cache>/models--org--name/snapshots/<commit>/<path>           relative symlink -> ../../blobs/<id>
//	<cache>/models--org--name/refs/<revision>                     the commit the revision pointed to
//
// gpuvet adds one hidden folder the hub tools ignore (the hub itself keeps `.no_exist` there):
//
//	<cache>/models--org--name/.gpuvet/<commit>.json               the file listing of that commit
//
// so a later offline check knows which files a complete snapshot holds.

var (
	commitRe  = regexp.MustCompile(`^[0-9a-f]{40}$`)
	sha256Re  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	repoSegRe = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,96}$`)
)

// DefaultCacheDir is the hub cache directory the hub libraries use: HF_HUB_CACHE, else $HF_HOME/hub,
// else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
func DefaultCacheDir() string {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	return filepath.Join(hfHome(), "hub")
}

func hfHome() string {
	if d := os.Getenv("HF_HOME"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	return filepath.Join(home, ".cache", "huggingface")
}

// ValidateModel checks a repo id the way the hub does: "name" or "org/name", each part 1-96 of
// [A-Za-z0-9_.-], no "--" or "..", not starting or ending with "-" or ".".
func ValidateModel(model string) error {
	parts := strings.Split(model, "/")
	if model == "" || len(parts) > 2 {
		return fmt.Errorf("model %q: expected a hub repo id like org/name", model)
	}
	for _, p := range parts {
		if !repoSegRe.MatchString(p) || strings.Contains(p, "--") || strings.Contains(p, "..") ||
			strings.ContainsAny(p[:1], "-.") || strings.ContainsAny(p[len(p)-1:], "-.") {
			return fmt.Errorf("model %q: part %q is not a valid hub name (letters, digits, _ . -; no -- or ..)", model, p)
		}
	}
	return nil
}

// validateRevision rejects revisions that could escape refs/ (they become a file path there).
func validateRevision(rev string) error {
	if rev == "" || len(rev) > 256 {
		return fmt.Errorf("revision %q: expected a branch, tag or commit", rev)
	}
	for _, p := range strings.Split(rev, "/") {
		if p == "" || p == "." || p == ".." || strings.ContainsAny(p, "\x00\\") {
			return fmt.Errorf("revision %q: part %q is not allowed in a revision", rev, p)
		}
	}
	return nil
}

// validateRepoPath rejects file paths from the hub that would land outside the snapshot folder.
func validateRepoPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\x00\\") {
		return fmt.Errorf("file path %q from the hub is not a relative path", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("file path %q from the hub has an empty, . or .. part", p)
		}
	}
	return nil
}

// repoDir is the hub's folder name for a model: models--org--name.
func repoDir(cacheDir, model string) string {
	return filepath.Join(cacheDir, "models--"+strings.ReplaceAll(model, "/", "--"))
}

// modelFromDir inverts repoDir; ok is false for folders that are not model repos.
func modelFromDir(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "models--")
	if !ok || rest == "" {
		return "", false
	}
	return strings.ReplaceAll(rest, "--", "/"), true
}

func blobPath(repo, id string) string         { return filepath.Join(repo, "blobs", id) }
func snapshotDir(repo, commit string) string  { return filepath.Join(repo, "snapshots", commit) }
func manifestPath(repo, commit string) string { return filepath.Join(repo, ".gpuvet", commit+".json") }
func refPath(repo, rev string) string         { return filepath.Join(repo, "refs", filepath.FromSlash(rev)) }
func snapshotFile(repo, commit, p string) string {
	return filepath.Join(snapshotDir(repo, commit), filepath.FromSlash(p))
}

// readRef returns the commit a revision points to in the cache ("" when unknown). A revision that is
// itself a commit hash points to itself, as in the hub libraries.
func readRef(repo, rev string) (string, error) {
	if commitRe.MatchString(rev) {
		return rev, nil
	}
	b, err := os.ReadFile(refPath(repo, rev))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read ref %s: %w", refPath(repo, rev), err)
	}
	c := strings.TrimSpace(string(b))
	if !commitRe.MatchString(c) {
		return "", fmt.Errorf("ref %s holds %q, expected a 40-hex commit; delete it and pull again", refPath(repo, rev), c)
	}
	return c, nil
}

// writeRef records rev -> commit (the hub writes no ref for a revision that is already a commit).
func writeRef(repo, rev, commit string) error {
	if rev == commit {
		return nil
	}
	p := refPath(repo, rev)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return writeFileAtomic(p, []byte(commit))
}

// writeFileAtomic replaces p with data in one rename, through a uniquely named temporary file so
// two gpuvet processes writing the same ref never trip over each other's temporary.
func writeFileAtomic(p string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), filepath.Base(p)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// manifest is the full file listing of one commit, as the hub's tree API gave it.
type manifest struct {
	Model  string `json:"model"`
	Commit string `json:"commit"`
	Files  []File `json:"files"`
}

func readManifest(repo, commit string) (*manifest, error) {
	b, err := os.ReadFile(manifestPath(repo, commit))
	if err != nil {
		return nil, err
	}
	var m manifest
	err = json.Unmarshal(b, &m)
	for i := 0; err == nil && i < len(m.Files); i++ {
		err = m.Files[i].validate()
	}
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w (delete it and pull again)", manifestPath(repo, commit), err)
	}
	return &m, nil
}

func writeManifest(repo string, m *manifest) error {
	p := manifestPath(repo, m.Commit)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(p, b)
}

// linkSnapshot points snapshots/<commit>/<path> at blobs/<id> with a relative symlink, replacing
// whatever was there atomically (symlink under a temporary name, then rename over).
func linkSnapshot(repo, commit string, f File) error {
	dst := snapshotFile(repo, commit, f.Path)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(dst), blobPath(repo, f.Blob))
	if err != nil {
		return err
	}
	if cur, err := os.Readlink(dst); err == nil && cur == rel {
		return nil
	}
	// The temporary link is made outside snapshots/ (a symlink's target is resolved from where it
	// ends up), so a crash never leaves a stray name in the snapshot an engine reads.
	tmpDir := filepath.Join(repo, ".gpuvet", "tmp")
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(tmpDir, fmt.Sprintf("link-%d-%d", os.Getpid(), linkSeq.Add(1)))
	_ = os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

var linkSeq atomic.Int64

// present reports whether f is in the snapshot: the link resolves to the right blob of the right size.
func present(repo, commit string, f File) bool {
	dst := snapshotFile(repo, commit, f.Path)
	target, err := os.Readlink(dst)
	if err != nil || filepath.Base(target) != f.Blob {
		return false
	}
	st, err := os.Stat(blobPath(repo, f.Blob))
	return err == nil && st.Mode().IsRegular() && st.Size() == f.Size
}

// List returns every snapshot in the cache, one per (model, commit), sorted by model then commit.
// Files are the snapshot's links that resolve to a blob; Refs name the revisions pointing at it.
func List(cacheDir string) ([]Snapshot, error) {
	cacheDir = cmp.Or(cacheDir, DefaultCacheDir())
	entries, err := os.ReadDir(cacheDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list cache %s: %w", cacheDir, err)
	}
	var out []Snapshot
	for _, e := range entries {
		model, ok := modelFromDir(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		snaps, err := listModel(cacheDir, model)
		if err != nil {
			return nil, err
		}
		out = append(out, snaps...)
	}
	return out, nil
}

func listModel(cacheDir, model string) ([]Snapshot, error) {
	repo := repoDir(cacheDir, model)
	commits, err := os.ReadDir(filepath.Join(repo, "snapshots"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", repo, err)
	}
	refs := readAllRefs(repo)
	var out []Snapshot
	for _, c := range commits {
		if !c.IsDir() {
			continue
		}
		s, err := scanSnapshot(repo, model, c.Name())
		if err != nil {
			return nil, err
		}
		s.Refs = refs[c.Name()]
		out = append(out, *s)
	}
	return out, nil
}

// readAllRefs maps commit -> revisions (sorted) from refs/ (nested refs like refs/pr/1 included).
func readAllRefs(repo string) map[string][]string {
	out := map[string][]string{}
	root := filepath.Join(repo, "refs")
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".tmp") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		c := strings.TrimSpace(string(b))
		out[c] = append(out[c], filepath.ToSlash(rel))
		return nil
	})
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// scanSnapshot reads what a snapshot folder holds: every symlink (or plain file, as the hub writes
// where symlinks are unsupported) with the blob it points to and its size.
func scanSnapshot(repo, model, commit string) (*Snapshot, error) {
	dir := snapshotDir(repo, commit)
	s := &Snapshot{Model: model, Commit: commit, Dir: dir}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		f := File{Path: filepath.ToSlash(rel)}
		if d.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			f.Blob = filepath.Base(target)
		}
		if st, err := os.Stat(p); err == nil {
			f.Size = st.Size()
		} else {
			f.Size = -1 // dangling link: Verify reports it
		}
		f.LFS = sha256Re.MatchString(f.Blob)
		s.Files = append(s.Files, f)
		if f.Size > 0 {
			s.Size += f.Size
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan snapshot %s: %w", dir, err)
	}
	return s, nil
}
