// Package filelimit reads input files with a size bound, so a wrong or hostile file (a 300 MB
// nvidia-smi field, a config listing millions of models) is refused with a clear error instead of
// taking gigabytes of memory. Every bound on a file gpuvet reads lives here.
package filelimit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Bounds of the files gpuvet reads: generous for any real file, far below what would hurt.
const (
	Config    = 4 << 20   // a YAML config or aicr recipe (real ones are a few KiB)
	Catalog   = 16 << 20  // a GPU/model catalog overlay
	GPUXML    = 64 << 20  // `nvidia-smi -q -x`, `topo -m`, `nvlink -s` (about 40 KiB per GPU in real captures)
	DCGM      = 64 << 20  // `dcgmi diag -j` output
	Data      = 1 << 30   // a prompt file (JSONL, ShareGPT): whole data sets are large
	Trace     = 256 << 20 // a request trace (Mooncake JSONL: a day of a service is tens of MiB)
	Result    = 256 << 20 // a summary.json, a vLLM bench result or a guidellm report
	Tokenizer = 256 << 20 // a tokenizer.json
	Small     = 1 << 20   // pid files and other small state
	RPCAnswer = 256 << 20 // one answer of OpenNebula's XML-RPC API (the host pool of a thousand hosts is tens of MiB)
	// Manifest bounds a run manifest's document and its journal each (a 1,000-node Kubernetes run
	// records ~42,000 objects: about 12 MiB); ManifestLine one line of the journal (a change: one
	// object, or up to a few hundred deleted).
	Manifest     = 64 << 20
	ManifestLine = 256 << 10
)

// ErrTooLarge is wrapped by Read's error when a file is over its bound.
var ErrTooLarge = fmt.Errorf("file too large")

// Read reads the file at path, refusing it when it holds more than limit bytes; what names the
// kind of file in the error ("config", "nvidia-smi XML").
func Read(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadFrom(f, limit, what+" "+path)
}

// ReadFrom reads r up to limit bytes; more is an error naming what.
func ReadFrom(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %s; is it the right file?", what, ErrTooLarge, Size(limit))
	}
	return b, nil
}

// Size writes a byte count in binary units: "64 MiB".
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Buffer collects a command's output up to Limit bytes and drops the rest (the command is not
// disturbed); Over says whether it did.
type Buffer struct {
	Limit int64
	Over  bool
	b     []byte
}

func (w *Buffer) Write(p []byte) (int, error) {
	room := w.Limit - int64(len(w.b))
	if int64(len(p)) > room {
		w.Over = true
		w.b = append(w.b, p[:max(room, 0)]...)
		return len(p), nil
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// Bytes is what was kept.
func (w *Buffer) Bytes() []byte { return w.b }

// Regular reads the regular file at path (not a link to one: the last name is not followed), up to
// limit bytes: a FIFO, a device (/dev/zero), a directory or a symbolic link is refused before a
// byte is read, so a file that names gpuvet's state cannot hang it, exhaust its memory or lead it
// through a link to another file. what names the kind of file in the error.
func Regular(path string, limit int64, what string) ([]byte, error) {
	f, err := OpenRegular(path, os.O_RDONLY, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Over its bound by its size: refused before a byte is read; under it, read into one buffer
	// of its size (no doubling on the way).
	if st, err := f.Stat(); err == nil {
		if st.Size() > limit {
			return nil, fmt.Errorf("%s %s: %w: more than %s; is it the right file?", what, path, ErrTooLarge, Size(limit))
		}
		b := make([]byte, 0, st.Size()+1)
		for {
			n, err := f.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
			if err == io.EOF {
				return b, nil
			}
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", what, path, err)
			}
			if len(b) == cap(b) { // it grew while read: the bounded reader takes the rest
				rest, err := ReadFrom(f, limit-int64(len(b)), what+" "+path)
				if err != nil {
					return nil, err
				}
				return append(b, rest...), nil
			}
		}
	}
	return ReadFrom(f, limit, what+" "+path)
}

// OpenRegular opens path with flag (O_RDONLY, O_WRONLY|O_APPEND, …), never through a symbolic
// link (O_NOFOLLOW) and without waiting on a FIFO (O_NONBLOCK, cleared once the file is known to
// be regular), and refuses anything but a regular file.
func OpenRegular(path string, flag int, what string) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK) {
			return nil, fmt.Errorf("%s %s: a symbolic link, not a file gpuvet wrote: refused (remove it)", what, path)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s %s: not a regular file (%s): refused", what, path, st.Mode().Type())
	}
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return f, nil
}
