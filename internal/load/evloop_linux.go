//go:build linux

package load

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuvet/gpuvet/internal/netstamp"
)

// The event-loop reader: streamed responses are read by at most one event loop per core, each over its
// own epoll set of non-blocking sockets, instead of by one goroutine per stream that wakes per token.
// The loop wakes on a short schedule (readtiming.go) and drains every readable socket; each event is
// still timed by the kernel's receive time of its read (SO_TIMESTAMPING), so reading late does not
// make TTFT or ITL late. Several events of one stream in one read are spaced evenly (spaceRead).

const (
	sweepEvery = 50 * time.Millisecond // how often error answers and settled responses are looked at
	yieldEvery = 32                    // sockets read between yields to other goroutines
	// streamsPerEv: streams per loop before another is started (up to GOMAXPROCS). On a loaded 2-core
	// VM one loop fell behind 1,000 streams where two kept up, while at 128 streams two loops cost
	// more CPU per token than one (each batches half the reads).
	streamsPerEv = 500
)

// eventLoopBuilt says whether this build has the event-loop reader.
const eventLoopBuilt = true

var errLoopClosed = errors.New("the event loop closed with the request in flight")

// evReader is one load's event-loop transport: a keep-alive pool of raw sockets and the loops.
type evReader struct {
	c         *client
	addr      string // host:port dialled
	host      string // Host header
	uri       string // request target
	dialer    net.Dialer
	loops     []*evLoop
	next      atomic.Uint32
	mu        sync.Mutex
	idle      []*evConn
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// evLoop is one event loop: an epoll set and the connections whose responses it reads.
type evLoop struct {
	r       *evReader
	epfd    int
	mu      sync.Mutex
	adds    []*evConn // connections with a request written, to read
	cancels []*evReq  // requests their callers gave up on
	kick    chan struct{}
	stop    chan struct{}
	conns   map[int32]*evConn // the loop's own: active connections by fd
	buf     []byte
	oob     []byte
	events  []unix.EpollEvent
	// Reads that carried tokens of a stream, and those that carried several (with how many).
	reads, multiReads, multiEvents int
	lastSweep                      time.Duration
	woken                          int // callers released since the loop last yielded
	sched                          pollSchedule
	// When the current and previous polls began; prevComplete: the previous visited every ready
	// socket (so one it did not read was empty then).
	polledAt, prevPolledAt time.Duration
	prevComplete           bool
}

// evConn is a connection and the request it carries (one at a time).
type evConn struct {
	fd   int
	loop *evLoop
	rx   bool // kernel receive timestamps are on
	resp respParser
	sse  sseFramer
	peek [1]byte
	// drainedAt: a read that left the socket empty began (0: never); attachedAt: request taken on.
	drainedAt, attachedAt time.Duration
	req                   *evReq // the request in flight
	errBody               []byte
}

// evReq is one request on an evConn, read by its caller once done is closed.
type evReq struct {
	conn   *evConn
	s      sseStream
	cancel context.CancelCauseFunc
	out    []byte // request bytes not yet written
	done   chan struct{}
	// Loop-owned until done is closed.
	settled   bool // the record is classified; the rest of the body is only drained
	cancelled bool // ended by the caller (its context): the caller classifies
	streaming bool // a 200 answer: events go to s
	headSeen  bool // the answer's head has been acted on (headDone)
	released  bool
	drained   int
	headAt    time.Duration // when the head was read
	settledAt time.Duration
}

// newEvReader makes the event-loop transport for endpoint (plain http), with loops for slots streams.
func newEvReader(c *client, u endpointURL, slots int) (*evReader, error) {
	r := &evReader{c: c, addr: u.addr, host: u.host, uri: u.uri,
		dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}}
	n := min(max(1, (slots+streamsPerEv-1)/streamsPerEv), runtime.GOMAXPROCS(0))
	for range n {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("epoll: %w", err)
		}
		l := &evLoop{r: r, epfd: epfd, kick: make(chan struct{}, 1), stop: make(chan struct{}),
			conns: map[int32]*evConn{}, buf: make([]byte, 64<<10), oob: make([]byte, netstamp.OOBSize),
			events: make([]unix.EpollEvent, 1024), sched: newPollSchedule()}
		r.loops = append(r.loops, l)
		r.wg.Go(l.run)
	}
	return r, nil
}

// describe is the result's account of the reader.
func (r *evReader) describe() string {
	return fmt.Sprintf("event loop (%d epoll loop(s) over non-blocking sockets, polled every %v to %v, below the shortest inter-token gap seen; gpuvet's own HTTP/1.1, chunked and SSE parsing)", len(r.loops), pollMin, pollMax)
}

// close stops the loops and closes every connection (once).
func (r *evReader) close() { r.closeOnce.Do(r.closeNow) }

func (r *evReader) closeNow() {
	for _, l := range r.loops {
		close(l.stop)
	}
	r.wg.Wait()
	r.mu.Lock()
	for _, cn := range r.idle {
		unix.Close(cn.fd)
	}
	r.idle = nil
	r.mu.Unlock()
	for _, l := range r.loops {
		l.takeWork()
		for _, cn := range l.conns { // none while a load runs to its end; a caller still waiting is let go
			l.release(cn, false)
		}
		unix.Close(l.epfd)
		if rx := r.c.rx; rx != nil {
			rx.addReads(l.reads, l.multiReads, l.multiEvents, l.sched.lo, l.sched.hi)
		}
	}
}

// do sends one request on a pooled or new connection and waits for the loop to read its answer.
func (r *evReader) do(ctx context.Context, cancel context.CancelCauseFunc, body []byte, rec *Record) {
	c := r.c
	req := writeRequest(make([]byte, 0, len(body)+256+len(c.key)), r.host, r.uri, c.key, body)
	for attempt := 0; ; attempt++ {
		getAt := c.since()
		cn, reused, err := r.get(ctx)
		if !reused || err != nil {
			rec.setConnect(int64(getAt), int64(c.since()))
		}
		rec.NewConnection = err == nil && !reused
		if err != nil {
			rec.sent = rec.start
			c.failCtx(ctx, rec, errConnect, err)
			return
		}
		n, err := writeSome(cn.fd, req)
		if err != nil {
			unix.Close(cn.fd)
			if reused && n == 0 && attempt == 0 {
				continue // the server closed the idle connection as it was taken: nothing sent, try a new one
			}
			rec.sent = rec.start
			c.failCtx(ctx, rec, errConnect, fmt.Errorf("writing the request: %w", err))
			return
		}
		if n == len(req) {
			rec.sent = c.since()
		}
		r.wait(ctx, cancel, cn, req[n:], rec)
		return
	}
}

// wait hands cn to its loop and waits until the loop releases it (or the context ends the request).
func (r *evReader) wait(ctx context.Context, cancel context.CancelCauseFunc, cn *evConn, rest []byte, rec *Record) {
	c := r.c
	q := &evReq{conn: cn, s: sseStream{c: c, rec: rec}, cancel: cancel, out: rest, done: make(chan struct{})}
	cn.req = q
	l := cn.loop
	l.mu.Lock()
	l.adds = append(l.adds, cn)
	l.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(cn.fd)}
	if len(rest) > 0 {
		ev.Events |= unix.EPOLLOUT
	}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, cn.fd, &ev); err != nil {
		cancel(fmt.Errorf("epoll: %w", err))
	}
	l.wake()
	select {
	case <-q.done:
	case <-ctx.Done():
		l.mu.Lock()
		l.cancels = append(l.cancels, q)
		l.mu.Unlock()
		l.wake()
		<-q.done
	}
	if !q.cancelled {
		return
	}
	if rec.sent == 0 {
		rec.sent = rec.start
	}
	rec.end = c.since()
	class := errConnect
	if len(q.out) == 0 {
		class = errCut
	}
	c.failCtx(ctx, rec, class, cmp.Or(context.Cause(ctx), errLoopClosed))
	if q.streaming {
		q.s.finalize()
	}
}

// wake makes a loop waiting for work look again.
func (l *evLoop) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// writeSome writes what the socket takes now (as a rule all: a request is far below the send buffer).
func writeSome(fd int, b []byte) (int, error) {
	n, err := unix.SendmsgN(fd, b, nil, nil, unix.MSG_NOSIGNAL)
	if err == unix.EAGAIN {
		return max(n, 0), nil
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// get takes a live idle connection, or dials one.
func (r *evReader) get(ctx context.Context) (*evConn, bool, error) {
	for {
		r.mu.Lock()
		var cn *evConn
		if k := len(r.idle); k > 0 {
			cn, r.idle = r.idle[k-1], r.idle[:k-1]
		}
		r.mu.Unlock()
		if cn == nil {
			break
		}
		if cn.alive() {
			return cn, true, nil
		}
		unix.Close(cn.fd)
	}
	cn, err := r.dial(ctx)
	return cn, false, err
}

// alive says whether an idle connection is still open (uvicorn closes idle ones after 5 s).
func (cn *evConn) alive() bool {
	_, _, err := unix.Recvfrom(cn.fd, cn.peek[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err == unix.EAGAIN
}

// dial opens a connection with net's dialer and takes its socket over (a duplicated descriptor).
func (r *evReader) dial(ctx context.Context) (*evConn, error) {
	nc, err := r.dialer.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	raw, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("taking the socket over: %w", derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	cn := &evConn{fd: fd, loop: r.loops[int(r.next.Add(1))%len(r.loops)]}
	if r.c.rx != nil {
		err := netstamp.EnableFD(fd)
		r.c.rx.note(err)
		cn.rx = err == nil
	}
	return cn, nil
}

// prewarm opens connections until n are idle (at most 10 s; see runner.prewarm).
func (r *evReader) prewarm(ctx context.Context, n int) {
	r.mu.Lock()
	need := n - len(r.idle)
	r.mu.Unlock()
	if need <= 0 {
		return
	}
	ctx, cancelDial := context.WithTimeout(ctx, 10*time.Second)
	defer cancelDial()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for range need {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cn, err := r.dial(ctx)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.idle = append(r.idle, cn)
			r.mu.Unlock()
		})
	}
	wg.Wait()
}

// run is the loop: while requests are in flight, read every readable socket and sleep until the next
// poll (in the Go scheduler, not in epoll_wait, so it never holds an OS thread in a blocking call).
func (l *evLoop) run() {
	for {
		l.takeWork()
		if len(l.conns) == 0 {
			select {
			case <-l.kick:
				continue
			case <-l.stop:
				return
			}
		}
		t0 := time.Now()
		l.poll()
		if now := l.r.c.since(); now-l.lastSweep >= sweepEvery {
			l.sweep(now)
			l.lastSweep = now
		}
		select {
		case <-l.stop:
			return
		default:
		}
		if d := l.sched.every - time.Since(t0); d > 0 {
			time.Sleep(d)
		}
	}
}

// poll reads every socket ready now, with enough epoll_waits to visit every connection once (not
// more: busy sockets would keep it away from new requests and the sweep).
func (l *evLoop) poll() {
	l.prevPolledAt, l.polledAt = l.polledAt, l.r.c.since()
	complete := false
	defer func() { l.prevComplete = complete }()
	for range len(l.conns)/len(l.events) + 1 {
		n, err := unix.EpollWait(l.epfd, l.events, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			l.failAll(fmt.Errorf("epoll_wait: %w", err))
			return
		}
		for i, e := range l.events[:n] {
			if cn := l.conns[e.Fd]; cn != nil {
				l.ready(cn, e.Events)
			}
			if i%yieldEvery == yieldEvery-1 && l.woken > 0 {
				// Let the callers whose requests ended send their next ones: on one core they
				// run only when the loop gives way, and a poll over 1,000 busy sockets takes
				// milliseconds of client lag. With none woken, a yield only costs a wake-up.
				l.woken = 0
				runtime.Gosched()
			}
		}
		if n < len(l.events) {
			complete = true
			return
		}
	}
}

// takeWork attaches new requests and ends the ones their callers gave up on.
func (l *evLoop) takeWork() {
	l.mu.Lock()
	adds, cancels := l.adds, l.cancels
	l.adds, l.cancels = nil, nil
	l.mu.Unlock()
	if len(adds) > 0 {
		// The load's clock only with work in hand: the loop starts before the epoch is set.
		now := l.r.c.since()
		for _, cn := range adds {
			l.conns[int32(cn.fd)] = cn
			cn.attachedAt = now
		}
	}
	for _, q := range cancels {
		if !q.released {
			l.release(q.conn, false)
		}
	}
}

// ready handles one socket's readiness: the rest of its request, then one read of what arrived.
func (l *evLoop) ready(cn *evConn, ev uint32) {
	c, q := l.r.c, cn.req
	if len(q.out) > 0 && ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		n, err := writeSome(cn.fd, q.out)
		if err != nil {
			l.transportErr(cn, fmt.Errorf("writing the request: %w", err), c.since())
			return
		}
		q.out = q.out[n:]
		if len(q.out) == 0 {
			q.s.rec.sent = c.since()
			e := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(cn.fd)}
			unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, cn.fd, &e)
		}
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
		return
	}
	var n int
	var stamp int64
	var err error
	readAt := c.since() // what arrived before this is in the read, unless the buffer fills
	if cn.rx {
		n, stamp, err = netstamp.RecvFD(cn.fd, l.buf, l.oob)
	} else {
		n, err = unix.Read(cn.fd, l.buf)
	}
	if err == unix.EAGAIN || err == unix.EINTR {
		return
	}
	now := c.since()
	switch {
	case err != nil:
		l.transportErr(cn, fmt.Errorf("read: %w", err), now)
		return
	case n == 0:
		l.eof(cn, now)
		return
	}
	// The read's time: its newest segment's kernel time when between the send and now (chunkTime).
	at, kernel := now, false
	if stamp != 0 {
		if kt := time.Unix(0, stamp).Sub(c.epoch); kt <= now && kt >= q.s.rec.sent {
			at, kernel = kt, true
		}
	}
	// What this read returned arrived after the socket was last seen empty: its last draining read,
	// or the previous poll when that visited every ready socket.
	from := cn.drainedAt
	if l.prevComplete && cn.attachedAt < l.prevPolledAt && cn.drainedAt < l.prevPolledAt {
		from = l.prevPolledAt
	}
	if n < len(l.buf) {
		cn.drainedAt = readAt
	}
	l.consume(cn, l.buf[:n], now, at, kernel, from)
}

// spaceRead handles the marks one read added to q's record (marks[m0:], all at the newest segment's
// time). Only the newest one's time is known; the others arrived after from (the socket last seen
// empty, the send or the previous token, whichever is latest), and are spaced evenly over that span:
// ITL keeps its exact sum instead of zero gaps, and TTFT is never later than the token.
func (l *evLoop) spaceRead(q *evReq, m0 int, from time.Duration) {
	marks := q.s.rec.marks
	k := len(marks) - m0
	if k > 0 {
		l.reads++
	}
	if k > 1 {
		l.multiReads++
		l.multiEvents += k
	}
	switch {
	case k == 1 && m0 > 0:
		l.sched.gap(marks[m0].at-marks[m0-1].at, false)
	case k > 1:
		if m0 > 0 {
			from = max(from, marks[m0-1].at)
		}
		spaceMarks(marks[m0:], max(from, q.s.rec.sent))
		for range k {
			l.sched.gap(0, true)
		}
	}
}

// consume takes one read's bytes, received at (kernel: its time), read at now, arrived after from.
func (l *evLoop) consume(cn *evConn, p []byte, now, at time.Duration, kernel bool, from time.Duration) {
	q, n := cn.req, len(p)
	m0 := len(q.s.rec.marks)
	used, perr := cn.resp.feed(p, func(b []byte) bool { return l.body(cn, b, now, at, kernel) })
	l.spaceRead(q, m0, from)
	switch {
	case q.released:
	case perr != nil:
		l.transportErr(cn, perr, now)
	case cn.resp.Done():
		l.headDone(cn, now)
		l.complete(cn, now, used == n && !cn.resp.Close)
	case cn.resp.HeadDone() && !q.headSeen:
		l.headDone(cn, now)
	case q.settled && q.drained > drainLimit:
		l.release(cn, false)
	}
}

// body takes body bytes of the response in flight.
func (l *evLoop) body(cn *evConn, b []byte, now, at time.Duration, kernel bool) bool {
	q := cn.req
	if !q.headSeen {
		l.headDone(cn, now)
	}
	if q.settled {
		q.drained += len(b)
		return q.drained <= drainLimit
	}
	if cn.resp.Status != 200 {
		limit := l.r.c.errBodyLen()
		cn.errBody = append(cn.errBody, b[:min(len(b), limit-len(cn.errBody))]...)
		if len(cn.errBody) >= limit {
			l.httpError(cn, now)
		}
		return true
	}
	if k := min(len(b), 200-len(q.s.start)); k > 0 {
		q.s.start = append(q.s.start, b[:k]...) // what a body that is no event stream began with
	}
	if !cn.sse.feed(b, func(data []byte) bool { return !l.event(cn, data, now, at, kernel) }) && !q.settled {
		q.s.broken(cn.sse.err, now) // a line or an event over maxSSELine
		l.settle(q, now)
	}
	return true
}

// headDone acts on the answer's head, once: a 200 streams unless compressed.
func (l *evLoop) headDone(cn *evConn, now time.Duration) {
	q := cn.req
	if q.headSeen || q.settled {
		return
	}
	q.headSeen, q.headAt = true, now
	if cn.resp.Status != 200 {
		return
	}
	q.streaming = true
	q.s.ctype = cn.resp.ContentType
	if !identity(cn.resp.ContentEncoding) {
		q.s.rec.end = now
		l.r.c.fail(q.s.rec, errNotSSE, notSSEDetail(cn.resp.ContentType, cn.resp.ContentEncoding, nil))
		l.settle(q, now)
	}
}

// event hands one SSE event to the request's stream; true when that ended the request.
func (l *evLoop) event(cn *evConn, data []byte, now, at time.Duration, kernel bool) bool {
	q := cn.req
	if kernel {
		q.s.rec.rxLag += now - at
		q.s.rec.rxN++
	}
	if q.s.event(data, at) {
		q.s.finalize() // an event that ended it with an error: the tokens so far still count
		l.settle(q, now)
		return true
	}
	return false
}

func (l *evLoop) settle(q *evReq, now time.Duration) {
	q.settled, q.settledAt = true, now
}

// httpError settles a non-200 answer with the start of its body; it ended when its head came.
func (l *evLoop) httpError(cn *evConn, now time.Duration) {
	q := cn.req
	q.s.rec.end = now
	if q.headAt > 0 {
		q.s.rec.end = q.headAt
	}
	class, detail := l.r.c.httpFailure(cn.resp.Status, cn.resp.Location, cn.errBody)
	l.r.c.fail(q.s.rec, class, detail)
	l.settle(q, now)
}

// complete is the response's end as framed; reusable says the connection may carry another request.
func (l *evLoop) complete(cn *evConn, now time.Duration, reusable bool) {
	q := cn.req
	if !q.settled {
		switch {
		case cn.resp.Status != 200:
			l.httpError(cn, now)
		default:
			q.streaming = true
			cn.sse.end(true, func(data []byte) bool { return !l.event(cn, data, now, now, false) })
			if !q.settled {
				q.s.broken(io.EOF, now)
				l.settle(q, now)
			}
		}
	}
	l.release(cn, reusable)
}

// eof is the server closing the connection.
func (l *evLoop) eof(cn *evConn, now time.Duration) {
	err := cn.resp.eof()
	if err == nil {
		l.complete(cn, now, false)
		return
	}
	if q := cn.req; !q.settled && q.streaming && err == io.ErrUnexpectedEOF {
		cn.sse.end(false, func(data []byte) bool { return !l.event(cn, data, now, now, false) })
	}
	l.transportErr(cn, err, now)
}

// transportErr ends the request in flight on a read, write or framing error (and closes the socket).
func (l *evLoop) transportErr(cn *evConn, err error, now time.Duration) {
	c, q := l.r.c, cn.req
	switch {
	case q.settled:
	case !cn.resp.HeadDone():
		q.s.rec.end = now
		class := errCut
		if len(q.out) > 0 {
			class = errConnect // the request was not all written: as net/http reports it
		}
		c.fail(q.s.rec, class, err.Error())
	case cn.resp.Status != 200:
		l.httpError(cn, now)
	default:
		q.streaming = true
		q.s.broken(err, now)
	}
	q.settled = true
	l.release(cn, false)
}

// sweep settles error answers past errBodyWait and closes settled responses that never end.
func (l *evLoop) sweep(now time.Duration) {
	for _, cn := range l.conns {
		q := cn.req
		switch {
		case q.settled && now-q.settledAt > drainTimeout:
			l.release(cn, false)
		case !q.settled && q.headSeen && cn.resp.Status != 200 && now-q.headAt > errBodyWait:
			l.httpError(cn, now)
		}
	}
}

// failAll ends every request in flight (the epoll set broke).
func (l *evLoop) failAll(err error) {
	for _, cn := range l.conns {
		l.transportErr(cn, err, l.r.c.since())
	}
}

// release gives cn back: to the pool when reusable, else closed; then wakes the caller.
func (l *evLoop) release(cn *evConn, reusable bool) {
	q := cn.req
	if q.released {
		return
	}
	q.released = true
	q.cancelled = !q.settled // released before it was read out: its caller classifies it
	delete(l.conns, int32(cn.fd))
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, cn.fd, nil)
	if reusable && q.settled && !q.cancelled {
		cn.resp.reset()
		cn.sse.reset()
		cn.errBody = cn.errBody[:0]
		cn.req = nil
		r := l.r
		r.mu.Lock()
		r.idle = append(r.idle, cn)
		r.mu.Unlock()
	} else {
		unix.Close(cn.fd)
	}
	l.woken++
	close(q.done)
}
