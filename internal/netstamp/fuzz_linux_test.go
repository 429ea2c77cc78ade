//go:build linux

package netstamp

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FuzzSCMTimestamp: any control-message bytes give a timestamp or 0, never a read past the buffer.
func FuzzSCMTimestamp(f *testing.F) {
	good := make([]byte, unix.CmsgSpace(3*16))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&good[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_TIMESTAMPING
	h.SetLen(unix.CmsgLen(3 * 16))
	binary.NativeEndian.PutUint64(good[unix.CmsgLen(0):], 1_700_000_000)
	binary.NativeEndian.PutUint64(good[unix.CmsgLen(0)+8:], 123)
	f.Add(good)
	f.Add(good[:unix.CmsgLen(8)])
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		// An aligned copy, as the kernel fills one from recvmsg.
		oob := make([]byte, len(b), len(b)+8)
		copy(oob, b)
		if ts := scmTimestamp(oob); ts != 0 && len(b) < unix.CmsgLen(16) {
			t.Fatalf("timestamp %d from %d bytes: shorter than one timespec's message", ts, len(b))
		}
	})
}

// The seed's well-formed message reads back.
func TestSCMTimestampReadsAMessage(t *testing.T) {
	good := make([]byte, unix.CmsgSpace(3*16))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&good[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_TIMESTAMPING
	h.SetLen(unix.CmsgLen(3 * 16))
	binary.NativeEndian.PutUint64(good[unix.CmsgLen(0):], 1_700_000_000)
	binary.NativeEndian.PutUint64(good[unix.CmsgLen(0)+8:], 123)
	if ts := scmTimestamp(good); ts != 1_700_000_000*1e9+123 {
		t.Errorf("timestamp %d", ts)
	}
}
