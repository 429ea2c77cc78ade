package load

import "unicode/utf8"

// fastChunk is parseChunk's fast path: one validating pass over the exact OpenAI chunk shapes, with no
// allocation. It returns ok=false for anything it is not sure it reads exactly as encoding/json would
// (\u sequences, keys in another case or repeated, numbers other than plain counts, an error object,
// any syntax error), and encoding/json then answers. A differential fuzz test holds the two together.
func fastChunk(b []byte) (c chunk, ok bool) {
	p := jscan{b: b}
	p.ws()
	if !p.objectKeys(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return p.choices(&c)
		case "usage":
			return p.usage(&c)
		case "error":
			return p.literal("null") // a real error object is rare: encoding/json reads it
		}
		return p.skip(0)
	}, topKeys) {
		return chunk{}, false
	}
	p.ws()
	return c, p.i == len(b)
}

// The keys of each object the fast path reads; a repeat sends the chunk to encoding/json.
var (
	topKeys    = []string{"choices", "usage", "error"}
	choiceKeys = []string{"delta", "text", "finish_reason"}
	deltaKeys  = []string{"content", "reasoning_content", "reasoning"}
	usageKeys  = []string{"prompt_tokens", "completion_tokens"}
)

// jscan is a cursor over one JSON text. Every method returns false on anything unexpected.
type jscan struct {
	b []byte
	i int
}

// maxFastDepth bounds nesting in skipped values; deeper goes to encoding/json.
const maxFastDepth = 32

func (p *jscan) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jscan) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// objectKeys reads an object (the cursor on its '{'), calling val for each key with the cursor on the
// value. A key that is not plain lowercase ASCII (encoding/json folds case) or a repeat of one of known
// is refused.
func (p *jscan) objectKeys(val func(key []byte) bool, known []string) bool {
	var seen uint8
	return p.seq('{', '}', func() bool {
		if p.peek() != '"' {
			return false
		}
		key, ok := p.key()
		if !ok {
			return false
		}
		for k, name := range known {
			if string(key) == name {
				if seen&(1<<k) != 0 {
					return false
				}
				seen |= 1 << k
			}
		}
		p.ws()
		if p.peek() != ':' {
			return false
		}
		p.i++
		p.ws()
		return val(key)
	})
}

// key reads a key string made of [a-z0-9_] only (the cursor on its '"').
func (p *jscan) key() ([]byte, bool) {
	p.i++
	s := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			k := p.b[s:p.i]
			p.i++
			return k, true
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
			p.i++
		default:
			return nil, false
		}
	}
	return nil, false
}

// str reads a string (the cursor on its '"') and returns its raw body and decoded length. It refuses
// \u escapes and invalid UTF-8 (which encoding/json replaces with U+FFFD, changing the length).
func (p *jscan) str() (raw []byte, n int, ok bool) {
	if p.peek() != '"' {
		return nil, 0, false
	}
	p.i++
	s := p.i
	ascii := true
	esc := 0
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			raw = p.b[s:p.i]
			p.i++
			if !ascii && !utf8.Valid(raw) {
				return nil, 0, false
			}
			return raw, len(raw) - esc, true
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return nil, 0, false
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
				esc++ // two bytes decode to one
			default:
				return nil, 0, false
			}
		case c < 0x20:
			return nil, 0, false
		default:
			ascii = ascii && c < utf8.RuneSelf
			p.i++
		}
	}
	return nil, 0, false
}

func (p *jscan) literal(lit string) bool {
	if len(p.b)-p.i < len(lit) || string(p.b[p.i:p.i+len(lit)]) != lit {
		return false
	}
	p.i += len(lit)
	return true
}

// null reads a null, if that is what the cursor is on.
func (p *jscan) null() bool { return p.peek() == 'n' && p.literal("null") }

// count reads a plain non-negative integer of at most 15 digits (no sign, fraction or exponent).
func (p *jscan) count() (int, bool) {
	s := p.i
	v := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		v = v*10 + int(p.b[p.i]-'0')
		p.i++
	}
	d := p.i - s
	if d == 0 || d > 15 || (d > 1 && p.b[s] == '0') {
		return 0, false
	}
	switch p.peek() {
	case '.', 'e', 'E':
		return 0, false
	}
	return v, true
}

// number validates a JSON number.
func (p *jscan) number() bool {
	if p.peek() == '-' {
		p.i++
	}
	digits := func() int {
		s := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		return p.i - s
	}
	s := p.i
	n := digits()
	if n == 0 || (n > 1 && p.b[s] == '0') {
		return false
	}
	if p.peek() == '.' {
		p.i++
		if digits() == 0 {
			return false
		}
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.i++
		if c := p.peek(); c == '+' || c == '-' {
			p.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// skip validates and passes over any value.
func (p *jscan) skip(depth int) bool {
	if depth > maxFastDepth {
		return false
	}
	switch c := p.peek(); {
	case c == '"':
		_, _, ok := p.str()
		return ok
	case c == '{':
		return p.objectKeys(func([]byte) bool { return p.skip(depth + 1) }, nil)
	case c == '[':
		return p.array(func() bool { return p.skip(depth + 1) })
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return false
}

// array reads an array (the cursor on its '['), calling elem with the cursor on each element.
func (p *jscan) array(elem func() bool) bool { return p.seq('[', ']', elem) }

// seq reads an array or an object (the cursor on open), calling elem with the cursor on each member.
func (p *jscan) seq(open, close byte, elem func() bool) bool {
	if p.peek() != open {
		return false
	}
	p.i++
	p.ws()
	if p.peek() == close {
		p.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		p.ws()
		switch p.peek() {
		case ',':
			p.i++
			p.ws()
		case close:
			p.i++
			return true
		default:
			return false
		}
	}
}

func (p *jscan) choices(c *chunk) bool {
	if p.null() {
		return true
	}
	return p.array(func() bool {
		c.HasChoices = true
		if p.null() {
			return true
		}
		return p.objectKeys(func(key []byte) bool {
			switch string(key) {
			case "delta":
				if p.null() {
					return true
				}
				return p.objectKeys(func(key []byte) bool {
					switch string(key) {
					case "content":
						return p.text(c)
					case "reasoning_content", "reasoning":
						return p.reasoning(c)
					}
					return p.skip(0)
				}, deltaKeys)
			case "text":
				return p.text(c)
			case "finish_reason":
				if p.null() {
					return true
				}
				raw, n, ok := p.str()
				if !ok || n != len(raw) {
					return false // an escaped finish reason: encoding/json decodes it
				}
				c.Finish = finishReason(raw)
				return true
			}
			return p.skip(0)
		}, choiceKeys)
	})
}

// text adds a string's decoded length to the chunk's text bytes (null adds nothing).
func (p *jscan) text(c *chunk) bool {
	if p.null() {
		return true
	}
	_, n, ok := p.str()
	c.TextBytes += n
	return ok
}

// reasoning adds a reasoning string's decoded length to the chunk's text and reasoning bytes.
func (p *jscan) reasoning(c *chunk) bool {
	before := c.TextBytes
	ok := p.text(c)
	c.ReasoningBytes += c.TextBytes - before
	return ok
}

func (p *jscan) usage(c *chunk) bool {
	if p.null() {
		return true
	}
	c.HasUsage = true
	return p.objectKeys(func(key []byte) bool {
		var dst *int
		switch string(key) {
		case "prompt_tokens":
			dst = &c.Usage.PromptTokens
		case "completion_tokens":
			dst = &c.Usage.CompletionTokens
		default:
			return p.skip(0)
		}
		if p.null() {
			return true // encoding/json leaves the field as it was
		}
		v, ok := p.count()
		*dst = v
		return ok
	}, usageKeys)
}

// finishReason returns the finish reason as a string, without allocating for the usual ones.
func finishReason(b []byte) string {
	for _, r := range [...]string{"stop", "length", "tool_calls", "abort", "content_filter"} {
		if string(b) == r {
			return r
		}
	}
	return string(b)
}
