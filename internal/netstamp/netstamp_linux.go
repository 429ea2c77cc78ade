//go:build linux

// Package netstamp gives TCP connections the kernel's software receive timestamps (SO_TIMESTAMPING):
// when data reached the socket, not when the program got round to reading it. The load generator times
// chunks with it; the simulator times a request's arrival with it, so both sides of a TTFT start and
// end at kernel times.
package netstamp

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// conn is a TCP connection whose reads also return the kernel's software receive timestamp
// (SO_TIMESTAMPING with SOF_TIMESTAMPING_RX_SOFTWARE, read with recvmsg): the time the data reached
// the socket, not the time gpuvet got round to reading it. For TCP the kernel reports the timestamp of
// the newest segment a read consumed, so when several SSE events arrive in one read they all carry the
// time the last of them arrived.
type conn struct {
	*net.TCPConn
	raw  syscall.RawConn
	oob  []byte
	last atomic.Int64 // unix ns of the newest segment read so far (0: none yet)
}

// Kernel says how times are taken, for results.
const Kernel = "kernel receive time (SO_TIMESTAMPING software RX, recvmsg)"

// Enable turns on software receive timestamps for c; it returns c unchanged, and why, where
// the kernel refuses.
func Enable(c net.Conn) (net.Conn, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, errors.New("not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = EnableFD(int(fd)) }); err != nil {
		return c, err
	}
	if serr != nil {
		return c, serr
	}
	return &conn{TCPConn: tc, raw: raw, oob: make([]byte, OOBSize)}, nil
}

func (c *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var stamp int64
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		n, stamp, rerr = RecvFD(int(fd), p, c.oob)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return n, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	// A read without a timestamp (the kernel enables stamping a moment after the first socket asks)
	// clears the last one, so a chunk is never given an older read's time.
	c.last.Store(stamp)
	return n, nil
}

// scmTimestamp returns the software timestamp (unix ns) of an SCM_TIMESTAMPING control message, or 0.
// The message holds three timespecs; the first is the software one. Parsed by hand: the per-read path
// must not allocate.
func scmTimestamp(oob []byte) int64 {
	hdr := unix.CmsgSpace(0)
	for len(oob) >= hdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			return 0
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPING && l >= unix.CmsgLen(16) {
			d := oob[unix.CmsgLen(0):]
			sec := int64(binary.NativeEndian.Uint64(d[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(d[8:16]))
			if sec == 0 && nsec == 0 {
				return 0
			}
			return sec*1e9 + nsec
		}
		oob = oob[min(unix.CmsgSpace(l-unix.CmsgLen(0)), len(oob)):]
	}
	return 0
}

// RXTime is the kernel receive time of the newest data read on conn, as a time.Time (zero: none). A
// TLS connection (anything with NetConn) answers for the TCP connection under it: its records are
// read from there, so the newest segment read is the newest data it decrypted, or a little after.
func RXTime(nc net.Conn) (time.Time, bool) {
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = u.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok {
		return time.Time{}, false
	}
	ns := c.last.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
