//go:build !linux

package load

import (
	"errors"
	"net"
	"time"
)

const rxKernel = "kernel receive time"

func withRXTimestamps(c net.Conn) (net.Conn, error) {
	return c, errors.New("kernel receive timestamps are read on Linux only")
}

func rxTime(net.Conn) (time.Time, bool) { return time.Time{}, false }
