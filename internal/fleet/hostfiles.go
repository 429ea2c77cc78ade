package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/gpuvet/gpuvet/internal/report"
	"github.com/gpuvet/gpuvet/internal/results"
)

// DigestHosts is the most hosts a fleet's summary.json keeps in full. A larger fleet's holds each
// host's digest (at 1,000 nodes × 8 GPUs the full entries would be hundreds of MB), each host's
// full entry written as a one-host summary hosts/NAME.json beside it (Host.DetailFile).
const DigestHosts = 4

// HostsDir is the folder of a fleet run's per-host results under --out.
const HostsDir = "hosts"

// OwnOut says whether out holds the summary.json of run runID: the run's own --out (every fleet
// run writes it there before it starts a host). `gpuvet clean` collects a host's partial results
// only into it (a manifest is a file anyone may have edited).
func OwnOut(out, runID string) bool {
	f, err := os.Open(filepath.Join(out, "summary.json"))
	if err != nil {
		return false
	}
	defer f.Close()
	var s struct {
		RunID string `json:"run_id"`
	}
	// Bounded: the run id is near the top of a summary; a file that is not one fails to decode.
	err = json.NewDecoder(io.LimitReader(f, 256<<20)).Decode(&s)
	return err == nil && runID != "" && s.RunID == runID
}

// WriteSummary writes a fleet run's summary.json into dir, and for a fleet of more than DigestHosts
// hosts each host's hosts/NAME.json with the summary holding their digests. It returns what
// summary.json holds; a host file that cannot be written keeps that host in full in the summary,
// said on warn.
func WriteSummary(dir string, s *results.Summary, warn io.Writer) (*results.Summary, error) {
	path := filepath.Join(dir, "summary.json")
	if len(s.Hosts) <= DigestHosts {
		return s, results.WriteJSON(path, s)
	}
	if err := writeHostFiles(dir, s); err != nil && warn != nil {
		fmt.Fprintln(warn, "gpuvet: WARNING: per-host results (those hosts stay in full in summary.json):", err)
	}
	written := digest(s, digestSummary)
	return written, writeDigest(path, written)
}

// WriteBaseline writes s as baseline.json into dir, after WriteSummary: the hosts WriteSummary wrote
// to their own files as their baseline digests (digestBaseline: the digest and what a comparison
// against it weighs), every other host in full.
func WriteBaseline(dir string, s *results.Summary) error {
	path := filepath.Join(dir, "baseline.json")
	if !slices.ContainsFunc(s.Hosts, func(h results.Host) bool { return h.DetailFile != "" }) {
		return results.WriteJSON(path, s)
	}
	return writeDigest(path, digest(s, digestBaseline))
}

// writeHostFiles writes hosts/NAME.json for every host of s and sets each host's DetailFile; the
// errors of the hosts it could not write come back joined (their DetailFile stays empty).
func writeHostFiles(dir string, s *results.Summary) error {
	var errs []error
	for i := range s.Hosts {
		h := &s.Hosts[i]
		one, err := report.HostsOnly(s, []string{h.Name})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rel := filepath.Join(HostsDir, Safe(h.Name)+".json")
		if err := writeCompact(filepath.Join(dir, rel), one); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", h.Name, err))
			continue
		}
		h.DetailFile = filepath.ToSlash(rel)
	}
	return errors.Join(errs...)
}

// writeCompact writes v as compact JSON atomically: indented, a thousand host files would take more
// than twice the disk (about 0.8 MB each for 8 GPUs), for tools to read.
func writeCompact(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return results.ReplaceFile(path, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Safe makes a host name usable in a file name, one name to one file: a name that had to be changed
// gets a hash of the original ("gpu:1" and "gpu_1" never share a file or a folder).
func Safe(name string) string {
	s := unsafeChars.ReplaceAllString(name, "_")
	if s == name && s != "" && s != "." && s != ".." {
		return s
	}
	h := sha256.Sum256([]byte(name))
	return s + "-" + hex.EncodeToString(h[:4])
}
