package load

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The event-loop reader speaks HTTP/1.1 itself, reading each response a socket read at a time
// (respParser). What it accepts follows net/http's client, which stays the reader for TLS, proxies
// and every request off the hot streaming path.

// writeRequest appends a POST of body to b, with the headers net/http's client sends for it.
func writeRequest(b []byte, host, uri, key string, body []byte) []byte {
	b = append(b, "POST "...)
	b = append(b, uri...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nUser-Agent: gpuvet\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"...)
	if key != "" {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, key...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// Limits on what a response may send before its body: a few hundred bytes from any real server.
const (
	maxRespHead  = 64 << 10
	maxChunkLine = 4096 // net/http's limit on a chunk-size line
)

// wireState is where respParser is in a response.
type wireState uint8

const (
	wsHead     wireState = iota // status line and headers
	wsSize                      // a chunk-size line
	wsData                      // chunk data (left bytes)
	wsDataEnd                   // the CRLF after chunk data
	wsTrailer                   // trailer lines after the last chunk, up to an empty line
	wsLength                    // a Content-Length body (left bytes)
	wsUntilEOF                  // a body that ends when the server closes
	wsDone                      // the response is complete
)

// respParser reads one HTTP/1.1 response fed in pieces, copying only what spans two of them.
type respParser struct {
	state  wireState
	Status int
	Close  bool // the connection carries no further request after this response
	// Location, ContentType and ContentEncoding are those headers (their first 200 bytes).
	Location, ContentType, ContentEncoding string
	chunked                                bool
	left                                   int64
	line                                   []byte // the head, or a chunk-size / trailer line, while incomplete
	crlf                                   int    // bytes of the CRLF after chunk data seen so far
	excess                                 int64  // chunk framing beyond the data (net/http's guard against framing floods)
}

func (r *respParser) reset() {
	*r = respParser{line: r.line[:0]}
}

// Done says whether the response is complete.
func (r *respParser) Done() bool { return r.state == wsDone }

// HeadDone says whether the status and headers have been read.
func (r *respParser) HeadDone() bool { return r.state != wsHead }

// feed consumes p, passing body bytes to body in order, and returns how many bytes of p it used (all,
// unless the response ended inside p). body returning false stops the feed at once, as does an error.
func (r *respParser) feed(p []byte, body func([]byte) bool) (int, error) {
	used := 0
	for used < len(p) && r.state != wsDone {
		q := p[used:]
		switch r.state {
		case wsHead:
			n, err := r.headBytes(q)
			used += n
			if err != nil {
				return used, err
			}
		case wsSize, wsTrailer:
			i := bytes.IndexByte(q, '\n')
			if i < 0 {
				r.line = append(r.line, q...)
				used = len(p)
				if len(r.line) > maxChunkLine {
					return used, errors.New("chunked encoding: line too long")
				}
				continue
			}
			used += i + 1
			line := q[:i+1]
			if len(r.line) > 0 {
				r.line = append(r.line, line...)
				line = r.line
			}
			var err error
			if r.state == wsSize {
				err = r.sizeLine(line)
			} else {
				r.trailerLine(line)
			}
			r.line = r.line[:0]
			if err != nil {
				return used, err
			}
		case wsData, wsLength:
			n := int(min(int64(len(q)), r.left))
			used += n
			r.left -= int64(n)
			if r.left == 0 {
				if r.state == wsData {
					r.state = wsDataEnd
				} else {
					r.state = wsDone
				}
			}
			if !body(q[:n]) {
				return used, nil
			}
		case wsDataEnd:
			if q[0] != "\r\n"[r.crlf] {
				return used, errors.New("malformed chunked encoding")
			}
			used++
			if r.crlf++; r.crlf == 2 {
				r.crlf, r.state = 0, wsSize
			}
		case wsUntilEOF:
			used = len(p)
			if !body(q) {
				return used, nil
			}
		}
	}
	return used, nil
}

// eof: nil when the close ends a body without length, else io.ErrUnexpectedEOF or errNoResponse.
func (r *respParser) eof() error {
	switch {
	case r.state == wsUntilEOF || r.state == wsDone:
		r.state = wsDone
		return nil
	case r.state == wsHead && len(r.line) == 0:
		return errNoResponse
	}
	return io.ErrUnexpectedEOF
}

var errNoResponse = errors.New("server closed the connection before answering")

// headBytes accumulates the head up to its empty line and parses it.
func (r *respParser) headBytes(q []byte) (int, error) {
	from := max(len(r.line)-3, 0) // the end marker may straddle the previous piece
	r.line = append(r.line, q...)
	end := headEnd(r.line[from:])
	if end < 0 {
		if len(r.line) > maxRespHead {
			return len(q), fmt.Errorf("response header longer than %d KiB", maxRespHead>>10)
		}
		return len(q), nil
	}
	end += from
	used := len(q) - (len(r.line) - end)
	head := r.line[:end]
	if err := r.parseHead(head); err != nil {
		return used, err
	}
	r.line = r.line[:0]
	return used, nil
}

// headEnd is the index just past the empty line ending a head (CRLF or bare LF lines), or -1.
func headEnd(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		if i < len(b) && b[i] == '\n' {
			return i + 1
		}
		if i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
			return i + 2
		}
	}
}

// parseHead reads the status line and the headers that frame the body, with net/http's rules: chunked
// wins over a length; 1xx answers are skipped; 204 and 304 have no body; HTTP/1.0 closes unless it
// says keep-alive. It walks the lines in place: it runs once per request on the event loop.
func (r *respParser) parseHead(head []byte) error {
	status, rest, more := bytes.Cut(bytes.TrimRight(head, "\r\n"), []byte("\n"))
	http10, err := r.statusLine(bytes.TrimRight(status, "\r"))
	if err != nil {
		return err
	}
	r.Close = http10
	length := int64(-1)
	for more {
		var l []byte
		l, rest, more = bytes.Cut(rest, []byte("\n"))
		if err := r.header(bytes.TrimRight(l, "\r"), http10, &length); err != nil {
			return err
		}
	}
	return r.bodyState(length)
}

// statusLine reads "HTTP/d.d code reason" into r.Status and says whether the version is below 1.1.
func (r *respParser) statusLine(status []byte) (http10 bool, err error) {
	proto, rest, ok := bytes.Cut(status, []byte(" "))
	// HTTP/d.d, as net/http reads it (any single digits; below 1.1 the connection closes by default).
	if !ok || len(proto) != 8 || !bytes.HasPrefix(proto, []byte("HTTP/")) || !isDigit(proto[5]) || proto[6] != '.' || !isDigit(proto[7]) {
		return false, fmt.Errorf("malformed HTTP response %q", head1(status))
	}
	code, _, _ := bytes.Cut(rest, []byte(" "))
	if len(code) != 3 || code[0] == '0' || !isDigit(code[0]) || !isDigit(code[1]) || !isDigit(code[2]) {
		return false, fmt.Errorf("malformed HTTP status code %q", head1(code))
	}
	r.Status = int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')
	return proto[5] < '1' || (proto[5] == '1' && proto[7] == '0'), nil
}

// header reads one header line; length is the Content-Length so far (-1: none).
func (r *respParser) header(l []byte, http10 bool, length *int64) error {
	// A name is not judged (net/http reads names with spaces); a line with no colon is refused.
	name, value, ok := bytes.Cut(l, []byte(":"))
	name = bytes.TrimRight(name, " \t")
	if !ok {
		return fmt.Errorf("malformed HTTP response header %q", head1(l))
	}
	value = bytes.Trim(value, " \t")
	switch {
	case asciiEqualFold(name, "Transfer-Encoding"):
		if !asciiEqualFold(value, "chunked") {
			return fmt.Errorf("unsupported transfer encoding %q", head1(value))
		}
		r.chunked = true
	case asciiEqualFold(name, "Content-Length"):
		n, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil || n < 0 || (*length >= 0 && n != *length) {
			return fmt.Errorf("bad Content-Length %q", head1(value))
		}
		*length = n
	case asciiEqualFold(name, "Location"):
		r.Location = string(value[:min(len(value), 200)])
	case asciiEqualFold(name, "Content-Type"):
		r.ContentType = string(value[:min(len(value), 200)])
	case asciiEqualFold(name, "Content-Encoding"):
		r.ContentEncoding = string(value[:min(len(value), 200)])
	case asciiEqualFold(name, "Connection"):
		r.connection(value, http10)
	}
	return nil
}

// connection reads a Connection header: close, or keep-alive for HTTP/1.0.
func (r *respParser) connection(value []byte, http10 bool) {
	for more := true; more; {
		var tok []byte
		tok, value, more = bytes.Cut(value, []byte(","))
		tok = bytes.Trim(tok, " \t")
		if asciiEqualFold(tok, "close") {
			r.Close = true
		} else if http10 && asciiEqualFold(tok, "keep-alive") {
			r.Close = false
		}
	}
}

// bodyState sets how the body is framed (length: its Content-Length, -1 for none).
func (r *respParser) bodyState(length int64) error {
	switch {
	case r.Status >= 100 && r.Status < 200 && r.Status != 101:
		r.reset() // an informational answer: the real one follows
		return nil
	case r.Status == 101:
		return errors.New("server switched protocols (HTTP 101)")
	case r.Status == 204 || r.Status == 304:
		r.state = wsDone
	case r.chunked:
		r.state = wsSize
	case length >= 0:
		r.state, r.left = wsLength, length
		if length == 0 {
			r.state = wsDone
		}
	default:
		r.state, r.Close = wsUntilEOF, true
	}
	return nil
}

// sizeLine reads one chunk-size line (with its "\n") as net/http does: CRLF only, extensions cut,
// trailing blanks trimmed, at most 16 hex digits, and a bound on framing that carries no data.
func (r *respParser) sizeLine(line []byte) error {
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return errors.New("chunked line ends with bare LF")
	}
	line = line[:len(line)-2]
	if bytes.IndexByte(line, '\r') >= 0 {
		return errors.New("invalid CR in chunked line")
	}
	if len(line) >= maxChunkLine {
		return errors.New("chunked encoding: line too long")
	}
	r.excess += int64(len(line)) + 2
	line, _, _ = bytes.Cut(bytes.TrimRight(line, " \t"), []byte(";"))
	n, err := parseHex(line)
	if err != nil {
		return err
	}
	r.excess = max(r.excess-16-2*int64(n), 0)
	if r.excess > 16*1024 {
		return errors.New("chunked encoding contains too much non-data")
	}
	if n == 0 {
		r.state = wsTrailer
		return nil
	}
	if n > 1<<62 {
		return errors.New("http chunk length too large")
	}
	r.state, r.left = wsData, int64(n)
	return nil
}

// trailerLine skips a trailer line, whatever its syntax (as net/http); an empty one ends the response.
func (r *respParser) trailerLine(line []byte) {
	if len(bytes.TrimRight(line, "\r\n")) == 0 {
		r.state = wsDone
	}
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func parseHex(v []byte) (uint64, error) {
	if len(v) == 0 {
		return 0, errors.New("empty hex number for chunk length")
	}
	var n uint64
	for i, b := range v {
		switch {
		case '0' <= b && b <= '9':
			b -= '0'
		case 'a' <= b && b <= 'f':
			b = b - 'a' + 10
		case 'A' <= b && b <= 'F':
			b = b - 'A' + 10
		default:
			return 0, errors.New("invalid byte in chunk length")
		}
		if i == 16 {
			return 0, errors.New("http chunk length too large")
		}
		n = n<<4 | uint64(b)
	}
	return n, nil
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func head1(b []byte) string { return head(b, 80) }
