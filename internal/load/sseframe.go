package load

import "bytes"

// sseFramer is sseReader turned inside out for the event loop: body bytes are pushed in as they arrive
// and each event's data is handed to emit, framed exactly as sseReader does (a fuzz test holds them
// together). An event's data is copied once, into a buffer the framer reuses.
type sseFramer struct {
	line []byte // an incomplete line carried to the next piece
	data []byte // the current event's data, when it spans lines or pieces
	have bool   // the current event has a data line
	err  error  // errLineTooLong or errEventTooLong, sticky
}

// feed frames p; emit returning false stops it (the stream is over) and feed then returns false too.
func (f *sseFramer) feed(p []byte, emit func([]byte) bool) bool {
	if f.err != nil {
		return false
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			f.line = append(f.line, p...)
			if len(f.line) > maxSSELine {
				f.err = errLineTooLong
				return false
			}
			return true
		}
		line := p[:i]
		p = p[i+1:]
		if len(f.line) > 0 {
			f.line = append(f.line, line...)
			line = f.line
		}
		if len(line)+1 > maxSSELine {
			f.err = errLineTooLong
			return false
		}
		ok := f.lineDone(bytes.TrimRight(line, "\r"), emit)
		f.line = f.line[:0]
		if !ok {
			return false
		}
	}
	return true
}

// end ends the body: clean, a last line without "\n" counts (as sseReader's); a pending event goes out.
func (f *sseFramer) end(clean bool, emit func([]byte) bool) bool {
	if f.err != nil {
		return false
	}
	if clean && len(f.line) > 0 {
		line := bytes.TrimRight(f.line, "\r")
		f.line = f.line[:0]
		if !f.lineDone(line, emit) {
			return false
		}
	}
	if f.have {
		f.have = false
		return emit(f.data)
	}
	return true
}

func (f *sseFramer) lineDone(line []byte, emit func([]byte) bool) bool {
	if len(line) == 0 {
		if !f.have {
			return true
		}
		f.have = false
		d := f.data
		f.data = f.data[:0]
		return emit(d)
	}
	value, ok := sseData(line)
	if !ok {
		return true
	}
	if f.have {
		f.data = append(f.data, '\n')
	}
	f.data = append(f.data, value...)
	if len(f.data) > maxSSELine {
		f.err = errEventTooLong
		return false
	}
	f.have = true
	return true
}

func (f *sseFramer) reset() {
	f.line, f.data, f.have, f.err = f.line[:0], f.data[:0], false, nil
}
