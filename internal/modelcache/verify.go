package modelcache

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Verify re-hashes every file of every snapshot of model (every model when model is "") and checks
// the snapshot links: each must resolve to a blob whose content hashes to the blob's name (SHA-256
// for LFS files, git blob SHA-1 for the others) and, where gpuvet pulled it, has the listed size.
// It returns nil when all is sound, else one error listing every problem and what to do.
func Verify(cacheDir, model string) error {
	cacheDir = cmp.Or(cacheDir, DefaultCacheDir())
	var snaps []Snapshot
	err := ValidateModel(model)
	switch {
	case model == "":
		snaps, err = List(cacheDir)
	case err == nil:
		snaps, err = listModel(cacheDir, model)
	}
	if err != nil {
		return err
	}
	if model != "" && len(snaps) == 0 {
		return fmt.Errorf("model %s has no snapshot in the cache %s; run: %s", model, cacheDir,
			PullCommand(model, Options{CacheDir: cacheDir}))
	}
	hashed := map[string]error{} // blob path -> result, so a blob shared by snapshots is read once
	var problems []string
	for _, s := range snaps {
		repo := repoDir(cacheDir, s.Model)
		listed := map[string]File{}
		if m, err := readManifest(repo, s.Commit); err == nil {
			for _, f := range m.Files {
				listed[f.Path] = f
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			problems = append(problems, err.Error())
		}
		for _, f := range s.Files {
			if p := verifyFile(repo, s, f, listed, hashed); p != "" {
				problems = append(problems, p)
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("cache %s: %d problem(s):\n  %s\nremove the named blobs/links and pull again", cacheDir, len(problems), strings.Join(problems, "\n  "))
	}
	return nil
}

// verifyFile returns "" when f is sound, else the problem in words.
func verifyFile(repo string, s Snapshot, f File, listed map[string]File, hashed map[string]error) string {
	name := fmt.Sprintf("%s@%s %s", s.Model, s.Commit[:min(len(s.Commit), 12)], f.Path)
	link := snapshotFile(repo, s.Commit, f.Path)
	if f.Blob == "" {
		return fmt.Sprintf("%s: not a link into blobs/ (the hub layout links every snapshot file to a blob)", name)
	}
	target, _ := os.Readlink(link)
	if want, _ := filepath.Rel(filepath.Dir(link), blobPath(repo, f.Blob)); target != want {
		return fmt.Sprintf("%s: link points at %q, expected %q", name, target, want)
	}
	if f.Size < 0 {
		return fmt.Sprintf("%s: link is dangling (blob %s missing)", name, f.Blob)
	}
	lf, ok := listed[f.Path]
	if ok && lf.Blob != f.Blob {
		return fmt.Sprintf("%s: links blob %s, the hub listed %s", name, f.Blob, lf.Blob)
	}
	if ok && lf.Size != f.Size {
		return fmt.Sprintf("%s: blob is %d bytes, the hub listed %d", name, f.Size, lf.Size)
	}
	lfs := sha256Re.MatchString(f.Blob)
	if !lfs && !commitRe.MatchString(f.Blob) {
		return fmt.Sprintf("%s: blob name %q is neither a SHA-256 nor a git SHA-1; cannot verify", name, f.Blob)
	}
	bp := blobPath(repo, f.Blob)
	err, done := hashed[bp]
	if !done {
		got, herr := hashFile(bp, File{Path: f.Path, Size: f.Size, Blob: f.Blob, LFS: lfs})
		switch {
		case herr != nil:
			err = herr
		case got != f.Blob:
			err = fmt.Errorf("content hashes to %s", got)
		}
		hashed[bp] = err
	}
	if err != nil {
		return fmt.Sprintf("%s: blob %s: %v", name, f.Blob, err)
	}
	return ""
}
