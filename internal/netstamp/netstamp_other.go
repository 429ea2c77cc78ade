//go:build !linux

package netstamp

import (
	"errors"
	"net"
	"time"
)

// Kernel says how times are taken, for results.
const Kernel = "kernel receive time"

// Enable returns c unchanged, with an error: only Linux is supported.
func Enable(c net.Conn) (net.Conn, error) {
	return c, errors.New("kernel receive timestamps are read on Linux only")
}

// RXTime never has a time off Linux.
func RXTime(net.Conn) (time.Time, bool) { return time.Time{}, false }
