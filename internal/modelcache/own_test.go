//go:build unix

package modelcache

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Own hands a root-owned 0755 folder (as a fresh volume comes up) to the populate step's user, keeps
// at least 0755, and leaves an owned folder alone; the user can then write the hub layout in it.
func TestOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Own changes a folder's owner: needs root (CI runs as root)")
	}
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	what, err := Own(dir, 65532, 65532)
	if err != nil || !strings.Contains(what, "was uid 0 gid 0 mode 0700, now uid 65532 gid 65532 mode 0755") {
		t.Fatalf("%q, %v", what, err)
	}
	st, _ := os.Stat(dir)
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 65532 || sys.Gid != 65532 || st.Mode().Perm() != 0o755 {
		t.Errorf("uid %d gid %d mode %v", sys.Uid, sys.Gid, st.Mode())
	}
	if what, err := Own(dir, 65532, 65532); err != nil || !strings.Contains(what, "already owned") {
		t.Errorf("second time: %q, %v", what, err)
	}
	if _, err := Own(filepath.Join(dir, "missing"), 1, 1); err == nil {
		t.Error("a missing folder is an error")
	}
}
