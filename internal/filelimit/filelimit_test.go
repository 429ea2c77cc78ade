package filelimit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("0123456789"), 0o644)
	if b, err := Read(p, 10, "config"); err != nil || string(b) != "0123456789" {
		t.Fatalf("at the bound: %q %v", b, err)
	}
	_, err := Read(p, 9, "config")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "config "+p) || !strings.Contains(err.Error(), "more than 9 bytes") {
		t.Fatalf("over the bound: %v", err)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "none"), 9, "config"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if Size(64<<20) != "64 MiB" || Size(1<<30) != "1 GiB" {
		t.Fatal(Size(64<<20), Size(1<<30))
	}
}

func TestBuffer(t *testing.T) {
	w := &Buffer{Limit: 5}
	w.Write([]byte("abc"))
	if n, err := w.Write([]byte("defg")); n != 4 || err != nil || !w.Over || string(w.Bytes()) != "abcde" {
		t.Fatalf("n %d err %v over %v kept %q", n, err, w.Over, w.Bytes())
	}
}

// Regular reads a regular file only: a link (even to a regular file), a FIFO (without waiting on
// it), a device and a directory are refused; over its bound is ErrTooLarge.
func TestRegular(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "f")
	os.WriteFile(p, []byte("0123456789"), 0o644)
	if b, err := Regular(p, 10, "manifest"); err != nil || string(b) != "0123456789" {
		t.Fatalf("a file: %q %v", b, err)
	}
	if _, err := Regular(p, 9, "manifest"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over: %v", err)
	}
	os.Symlink(p, filepath.Join(d, "link"))
	fifo := filepath.Join(d, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{filepath.Join(d, "link"): "symbolic link", fifo: "not a regular file",
		"/dev/zero": "not a regular file", d: "not a regular file"} {
		if _, err := Regular(path, 1<<20, "manifest"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", path, err)
		}
	}
}
