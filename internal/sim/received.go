package sim

import (
	"net"
	"net/http"
	"time"

	"github.com/gpuvet/gpuvet/internal/netstamp"
)

// stampListener asks the kernel for receive timestamps on each accepted connection, so the trace can
// say when a request reached the server, not only when its handler ran. A connection the kernel
// refuses them on is served as it is (the trace then has no received time).
type stampListener struct{ net.Listener }

func (l stampListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c, _ = netstamp.Enable(c)
	return c, nil
}

// connKey is the request context's key for its connection (set by the server's ConnContext).
type connKey struct{}

// requestReceived is the kernel's receive time of the newest bytes read on r's connection before its
// handler started at arrival, or zero where unknown or not before arrival.
func requestReceived(r *http.Request, arrival time.Time) time.Time {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	if c == nil {
		return time.Time{}
	}
	at, ok := netstamp.RXTime(c)
	if !ok || at.After(arrival) {
		return time.Time{}
	}
	return at
}
