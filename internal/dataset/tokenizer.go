package dataset

// A Hugging Face tokenizer.json loader for the byte-level BPE family (GPT-2, Llama 3, Qwen 2/2.5/3,
// DeepSeek: model.type "BPE" with a ByteLevel pre-tokenizer).
//
// Why not a library: github.com/sugarme/tokenizer v0.3.0 panics loading a Qwen 2 or Llama 3 file (Go's
// regexp has no lookahead for their `\s+(?!\S)` split) and its ByteLevel split drops that rule;
// mattn/tensai is not on the module proxy; daulet/tokenizers needs cgo. So this file counts and builds
// text itself, with github.com/dlclark/regexp2 (lookahead, \p{L}) running the file's own regexes.
//
// Supported: normalizer null, NFC/NFD/NFKC/NFKD or a Sequence of them; pre_tokenizer ByteLevel (use_regex,
// add_prefix_space), Split (Regex or String; Isolated, Removed, MergedWithPrevious, MergedWithNext,
// Contiguous) and Sequence; model BPE with merges as "a b" or ["a", "b"], ignore_merges; added_tokens
// matched literally first; post_processor null, ByteLevel, TemplateProcessing, Bert/RobertaProcessing or
// a Sequence (to count the special tokens it adds). Anything else is refused with the field named.
// Not modelled: added tokens' lstrip/rstrip/single_word (they matter only for text holding special
// tokens), dropout, offsets.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"

	"github.com/gpuvet/gpuvet/internal/filelimit"
)

// gpt2Split is the split the ByteLevel pre-tokenizer does when use_regex is true (its default).
const gpt2Split = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// Tokenizer is a loaded byte-level BPE tokenizer.json. It is safe for concurrent use.
type Tokenizer struct {
	// Path is the file it was loaded from ("" when parsed from bytes).
	Path string

	normal    []norm.Form
	pre       []splitter
	prefix    bool // some ByteLevel step has add_prefix_space
	vocab     map[string]int
	tokens    map[int]string // id -> token, for Decode
	ranks     map[[2]string]int
	ignoreMrg bool // model.ignore_merges: a piece found whole in the vocab is one token
	added     []addedToken
	addedIDs  map[int]string
	specials  int // tokens the post_processor adds around one sequence

	mu    sync.Mutex
	cache map[string][]int
}

type addedToken struct {
	content string
	id      int
}

// splitter is one step of the pre-tokenizer: a Split, or a ByteLevel (which first prepends a space to
// each piece when prefix is set, then splits with GPT-2's regex when re is set).
type splitter struct {
	re       *regexp2.Regexp
	behavior string
	prefix   bool
}

// byteChar maps each byte to the printable rune GPT-2's byte-level BPE uses for it (space -> 'Ġ');
// charByte is the inverse.
var byteChar, charByte = byteLevelAlphabet()

func byteLevelAlphabet() ([256]rune, map[rune]byte) {
	var bc [256]rune
	cb := make(map[rune]byte, 256)
	n := 0
	for b := range 256 {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = rune(256 + n)
			n++
		}
		bc[b] = r
		cb[r] = byte(b)
	}
	return bc, cb
}

// LoadTokenizer reads and parses a tokenizer.json file.
func LoadTokenizer(path string) (*Tokenizer, error) {
	b, err := filelimit.Read(path, filelimit.Tokenizer, "tokenizer")
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	t, err := ParseTokenizer(b)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	t.Path = path
	return t, nil
}

// tokenizerFile is the part of tokenizer.json gpuvet reads. Sub-objects stay raw so each is checked
// with its own field named in errors.
type tokenizerFile struct {
	AddedTokens []struct {
		ID      *int    `json:"id"`
		Content *string `json:"content"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         *struct {
		Type                    string            `json:"type"`
		Vocab                   map[string]int    `json:"vocab"`
		Merges                  []json.RawMessage `json:"merges"`
		IgnoreMerges            bool              `json:"ignore_merges"`
		ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	} `json:"model"`
}

// ParseTokenizer parses the content of a tokenizer.json. Errors name the field at fault.
func ParseTokenizer(data []byte) (*Tokenizer, error) {
	var f tokenizerFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", err)
	}
	t := &Tokenizer{addedIDs: map[int]string{}, cache: map[string][]int{}}
	if err := t.parseModel(&f); err != nil {
		return nil, err
	}
	for i, a := range f.AddedTokens {
		if a.ID == nil || a.Content == nil || *a.Content == "" {
			return nil, fmt.Errorf("added_tokens[%d]: want an \"id\" and a non-empty \"content\"", i)
		}
		t.added = append(t.added, addedToken{content: *a.Content, id: *a.ID})
		t.addedIDs[*a.ID] = *a.Content
	}
	// Longest first, so "<|im_start|>" wins over a shorter token it begins with.
	slices.SortStableFunc(t.added, func(a, b addedToken) int { return len(b.content) - len(a.content) })
	var err error
	if t.normal, err = parseNormalizer(f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	byteLevel := false
	if err := t.parsePre(f.PreTokenizer, "pre_tokenizer", &byteLevel); err != nil {
		return nil, err
	}
	if !byteLevel {
		return nil, errors.New("pre_tokenizer: no ByteLevel step: only byte-level BPE tokenizers (GPT-2, Llama 3, Qwen…) are supported; omit --tokenizer to count with the server")
	}
	if t.specials, err = countSpecials(f.PostProcessor, "post_processor"); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Tokenizer) parseModel(f *tokenizerFile) error {
	m := f.Model
	switch {
	case m == nil:
		return errors.New("model: missing")
	case m.Type != "BPE" && m.Type != "":
		return fmt.Errorf("model.type %q: only \"BPE\" is supported; omit --tokenizer to count with the server", m.Type)
	case len(m.Vocab) == 0:
		return errors.New("model.vocab: missing or empty")
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return fmt.Errorf("model.continuing_subword_prefix %q: not a byte-level BPE; omit --tokenizer", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return fmt.Errorf("model.end_of_word_suffix %q: not a byte-level BPE; omit --tokenizer", *m.EndOfWordSuffix)
	}
	t.vocab, t.ignoreMrg = m.Vocab, m.IgnoreMerges
	t.tokens = make(map[int]string, len(m.Vocab))
	for s, id := range m.Vocab {
		if other, dup := t.tokens[id]; dup {
			a, b := min(s, other), max(s, other) // the same message whatever the map order
			return fmt.Errorf("model.vocab: id %d is given to both %q and %q", id, a, b)
		}
		t.tokens[id] = s
	}
	for b, r := range byteChar {
		if _, ok := t.vocab[string(r)]; !ok {
			return fmt.Errorf("model.vocab: no token for byte 0x%02x (%q): not a byte-level BPE vocabulary", b, string(r))
		}
	}
	t.ranks = make(map[[2]string]int, len(m.Merges))
	for i, raw := range m.Merges {
		p, err := parseMerge(raw)
		if err != nil {
			return fmt.Errorf("model.merges[%d]: %w", i, err)
		}
		if _, ok := t.vocab[p[0]+p[1]]; !ok {
			return fmt.Errorf("model.merges[%d]: %q + %q makes %q, which is not in model.vocab", i, p[0], p[1], p[0]+p[1])
		}
		if _, dup := t.ranks[p]; !dup {
			t.ranks[p] = i
		}
	}
	return nil
}

// parseMerge reads a merge written "a b" (older files) or ["a", "b"] (newer ones).
func parseMerge(raw json.RawMessage) ([2]string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		a, b, ok := strings.Cut(s, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return [2]string{}, fmt.Errorf("%q: want two symbols separated by one space", s)
		}
		return [2]string{a, b}, nil
	}
	var p []string
	if err := json.Unmarshal(raw, &p); err != nil || len(p) != 2 || p[0] == "" || p[1] == "" {
		return [2]string{}, fmt.Errorf("%s: want \"a b\" or [\"a\", \"b\"]", head(raw, 60))
	}
	return [2]string{p[0], p[1]}, nil
}

func head(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// component is the common shape of normalizer, pre_tokenizer and post_processor objects.
type component struct {
	Type string `json:"type"`
	// Sequence members.
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	// ByteLevel.
	AddPrefixSpace bool  `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
	// Split.
	Pattern *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
	// TemplateProcessing.
	Single []map[string]json.RawMessage `json:"single"`
}

func parseComponent(raw json.RawMessage, field string) (*component, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return &c, nil
}

func parseNormalizer(raw json.RawMessage, field string) ([]norm.Form, error) {
	c, err := parseComponent(raw, field)
	if c == nil || err != nil {
		return nil, err
	}
	forms := map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}
	if f, ok := forms[c.Type]; ok {
		return []norm.Form{f}, nil
	}
	if c.Type != "Sequence" {
		return nil, fmt.Errorf("%s.type %q: not supported (NFC, NFD, NFKC, NFKD or a Sequence of them); omit --tokenizer to count with the server", field, c.Type)
	}
	var out []norm.Form
	for i, n := range c.Normalizers {
		fs, err := parseNormalizer(n, fmt.Sprintf("%s.normalizers[%d]", field, i))
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

func (t *Tokenizer) parsePre(raw json.RawMessage, field string, byteLevel *bool) error {
	c, err := parseComponent(raw, field)
	if c == nil || err != nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		for i, p := range c.Pretokenizers {
			if err := t.parsePre(p, fmt.Sprintf("%s.pretokenizers[%d]", field, i), byteLevel); err != nil {
				return err
			}
		}
	case "ByteLevel":
		*byteLevel = true
		t.prefix = t.prefix || c.AddPrefixSpace
		sp := splitter{behavior: "Isolated", prefix: c.AddPrefixSpace}
		if c.UseRegex == nil || *c.UseRegex {
			sp.re = regexp2.MustCompile(gpt2Split, regexp2.None)
		}
		t.pre = append(t.pre, sp)
	case "Split":
		if c.Pattern == nil || (c.Pattern.Regex == nil) == (c.Pattern.String == nil) {
			return fmt.Errorf("%s.pattern: want {\"Regex\": …} or {\"String\": …}", field)
		}
		if c.Invert {
			return fmt.Errorf("%s.invert: true is not supported; omit --tokenizer to count with the server", field)
		}
		if !slices.Contains([]string{"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"}, c.Behavior) {
			return fmt.Errorf("%s.behavior %q: want Isolated, Removed, MergedWithPrevious, MergedWithNext or Contiguous", field, c.Behavior)
		}
		if c.Pattern.String != nil { // a literal split
			c.Pattern.Regex = new(regexp2.Escape(*c.Pattern.String))
		}
		re, err := regexp2.Compile(*c.Pattern.Regex, regexp2.None)
		if err != nil {
			return fmt.Errorf("%s.pattern: %w", field, err)
		}
		t.pre = append(t.pre, splitter{re: re, behavior: c.Behavior})
	default:
		return fmt.Errorf("%s.type %q: not supported (ByteLevel, Split or Sequence); omit --tokenizer to count with the server", field, c.Type)
	}
	return nil
}

// countSpecials is how many tokens the post-processor adds to a single sequence (a BOS, CLS/SEP…).
func countSpecials(raw json.RawMessage, field string) (int, error) {
	c, err := parseComponent(raw, field)
	if c == nil || err != nil {
		return 0, err
	}
	switch c.Type {
	case "ByteLevel":
		return 0, nil
	case "BertProcessing", "RobertaProcessing":
		return 2, nil
	case "TemplateProcessing":
		n := 0
		for _, piece := range c.Single {
			if _, ok := piece["SpecialToken"]; ok {
				n++
			}
		}
		return n, nil
	case "Sequence":
		n := 0
		for i, p := range c.Processors {
			k, err := countSpecials(p, fmt.Sprintf("%s.processors[%d]", field, i))
			if err != nil {
				return 0, err
			}
			n += k
		}
		return n, nil
	}
	return 0, fmt.Errorf("%s.type %q: not supported (ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing or Sequence)", field, c.Type)
}

// SpecialTokens is how many tokens the file's post_processor adds around one sequence (Llama 3: 1, the
// BOS; Qwen: 0). A server counting a completions prompt "with special tokens" adds these.
func (t *Tokenizer) SpecialTokens() int { return t.specials }

// Count implements Counter: the tokens of text as the server counts a completions prompt, that is
// Encode plus the post_processor's special tokens. A chat template adds more: see Synthetic.Rebase.
func (t *Tokenizer) Count(_ context.Context, text string) (int, error) {
	return len(t.Encode(text)) + t.specials, nil
}

// Encode returns the token ids of text, without the special tokens the post_processor adds. Added
// tokens written in the text ("<|im_start|>") are matched as themselves.
func (t *Tokenizer) Encode(text string) []int {
	var ids []int
	for text != "" {
		at, tok := t.nextAdded(text)
		ids = t.encodePlain(ids, text[:at])
		if tok == nil {
			break
		}
		ids = append(ids, tok.id)
		text = text[at+len(tok.content):]
	}
	return ids
}

// nextAdded finds the first added token in s: its byte offset (len(s) when none) and the token.
func (t *Tokenizer) nextAdded(s string) (int, *addedToken) {
	best, bestTok := len(s), (*addedToken)(nil)
	for i := range t.added {
		a := &t.added[i]
		if j := strings.Index(s[:min(len(s), best+len(a.content))], a.content); j >= 0 && j < best {
			best, bestTok = j, a
		}
	}
	return best, bestTok
}

func (t *Tokenizer) encodePlain(ids []int, s string) []int {
	if s == "" {
		return ids
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	for _, f := range t.normal {
		s = f.String(s)
	}
	for _, piece := range t.pretokenize(s) {
		ids = append(ids, t.word(piece)...)
	}
	return ids
}

// pretokenize applies each Split step to every piece so far.
func (t *Tokenizer) pretokenize(s string) []string {
	pieces := []string{s}
	for _, sp := range t.pre {
		var next []string
		for _, p := range pieces {
			next = sp.split(next, p)
		}
		pieces = next
	}
	return pieces
}

// split cuts s at the matches of the splitter's regex, keeping matches as the behavior says.
func (sp splitter) split(out []string, s string) []string {
	if sp.prefix && !strings.HasPrefix(s, " ") {
		s = " " + s
	}
	if sp.re == nil {
		return append(out, s)
	}
	type span struct {
		lo, hi int
		match  bool
	}
	var spans []span
	runes := []rune(s)
	// regexp2 reports rune indexes: turn them into byte offsets.
	byteAt := make([]int, len(runes)+1)
	for i, r := range runes {
		byteAt[i+1] = byteAt[i] + utf8.RuneLen(r)
	}
	last := 0
	m, err := sp.re.FindRunesMatch(runes)
	for err == nil && m != nil {
		lo, hi := m.Index, m.Index+m.Length
		if hi > lo {
			if lo > last {
				spans = append(spans, span{byteAt[last], byteAt[lo], false})
			}
			spans = append(spans, span{byteAt[lo], byteAt[hi], true})
			last = hi
		}
		m, err = sp.re.FindNextMatch(m)
	}
	if last < len(runes) {
		spans = append(spans, span{byteAt[last], byteAt[len(runes)], false})
	}
	var pending string // MergedWithNext: a match waiting for what follows
	for i, sn := range spans {
		text := s[sn.lo:sn.hi]
		switch {
		case !sn.match || sp.behavior == "Isolated":
			out = append(out, pending+text)
			pending = ""
		case sp.behavior == "Removed":
		case sp.behavior == "MergedWithPrevious" && len(out) > 0 && i > 0:
			out[len(out)-1] += text
		case sp.behavior == "MergedWithNext":
			pending += text
		case sp.behavior == "Contiguous" && i > 0 && spans[i-1].match:
			out[len(out)-1] += text
		default:
			out = append(out, text)
		}
	}
	if pending != "" {
		out = append(out, pending)
	}
	return out
}

// word BPE-encodes one pre-token, with a cache: prompts repeat the same words.
func (t *Tokenizer) word(piece string) []int {
	t.mu.Lock()
	ids, ok := t.cache[piece]
	t.mu.Unlock()
	if ok {
		return ids
	}
	syms := make([]string, 0, len(piece))
	for i := 0; i < len(piece); i++ {
		syms = append(syms, string(byteChar[piece[i]]))
	}
	if id, ok := t.vocab[strings.Join(syms, "")]; ok && t.ignoreMrg {
		ids = []int{id}
	} else {
		ids = t.bpe(syms)
	}
	t.mu.Lock()
	if len(t.cache) < 1<<16 {
		t.cache[piece] = ids
	}
	t.mu.Unlock()
	return ids
}

// bpe merges the adjacent pair of lowest rank (the leftmost on a tie) until no pair has a rank, as the
// reference does, and maps the symbols to ids (all are in the vocab: merges were checked at load).
func (t *Tokenizer) bpe(syms []string) []int {
	for len(syms) > 1 {
		best, at := -1, -1
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := t.ranks[[2]string{syms[i], syms[i+1]}]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] += syms[at+1]
		syms = slices.Delete(syms, at+1, at+2)
	}
	ids := make([]int, len(syms))
	for i, s := range syms {
		ids[i] = t.vocab[s]
	}
	return ids
}

// Decode turns ids back into text (added tokens as their content). Unknown ids are an error.
func (t *Tokenizer) Decode(ids []int) (string, error) {
	var b []byte
	for _, id := range ids {
		if s, ok := t.addedIDs[id]; ok {
			b = append(b, s...)
			continue
		}
		s, ok := t.tokens[id]
		if !ok {
			return "", fmt.Errorf("token id %d is not in the vocabulary", id)
		}
		for _, r := range s {
			c, ok := charByte[r]
			if !ok {
				return "", fmt.Errorf("token id %d (%q) holds %q, not a byte-level symbol", id, s, r)
			}
			b = append(b, c)
		}
	}
	return string(b), nil
}
