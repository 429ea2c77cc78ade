package modelcache

import (
	"cmp"
	"fmt"
	"os"
)

// CachedFile returns the path of file p (e.g. "tokenizer.json") in the cached snapshot of model at
// revision rev ("main" when empty), found through refs/<rev> as the hub libraries do. ok is false when
// the model, the ref or the file is not in the cache; err is set only for a cache that cannot be read
// or a ref that is corrupt.
func CachedFile(cacheDir, model, rev, p string) (path string, ok bool, err error) {
	rev = cmp.Or(rev, "main")
	if ValidateModel(model) != nil || validateRevision(rev) != nil || validateRepoPath(p) != nil {
		return "", false, nil // not a hub id (a served alias, say): nothing to find
	}
	repo := repoDir(cacheDir, model)
	commit, err := readRef(repo, rev)
	if err != nil || commit == "" {
		return "", false, err
	}
	path = snapshotFile(repo, commit, p)
	fi, err := os.Stat(path)
	switch {
	case os.IsNotExist(err):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("cached %s of %s: %w", p, model, err)
	case !fi.Mode().IsRegular():
		return "", false, fmt.Errorf("cached %s of %s is not a regular file (%s)", p, model, path)
	}
	return path, true, nil
}

// Tokenizer is model's tokenizer.json in the hub cache dir (DefaultCacheDir when dir is ""), or ""
// when the cache has none: what the load generator sizes synthetic prompts with when it is given no
// --tokenizer. err is set only for a cache that cannot be read.
func Tokenizer(dir, model string) (string, error) {
	dir = cmp.Or(dir, DefaultCacheDir())
	p, _, err := CachedFile(dir, model, "main", "tokenizer.json") // "" unless found
	return p, err
}
