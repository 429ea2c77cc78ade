package sim

import (
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
)

// The simulator's tokenizer is deterministic and simple, and it is the only one the simulator uses,
// so /tokenize always agrees with usage.prompt_tokens:
//
//   - text is cut into pieces; a piece starts at every whitespace byte that follows a non-whitespace
//     byte, and a piece never grows past 4 bytes ("hello world" -> "hell" "o" " wor" "ld": 4 tokens),
//     close to the usual 4-bytes-per-token of real BPE tokenizers on English;
//   - a piece's id is FNV-1a of its bytes modulo the model's vocabulary;
//   - generated text is drawn from a fixed list of words of at most 4 bytes with a leading space,
//     so each generated token re-tokenizes to exactly one token.
type tokenizer struct {
	vocab int
	mu    sync.Mutex
	known map[int]string // id -> piece, for /detokenize: output words and pieces seen by /tokenize
}

const maxPiece = 4
const maxKnown = 1 << 20

func newTokenizer(vocab int) *tokenizer {
	t := &tokenizer{vocab: vocab, known: make(map[int]string, len(outputWords))}
	for _, w := range outputWords {
		t.known[t.id(w)] = w
	}
	return t
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// pieces calls f for each token piece of text.
func pieces(text string, f func(string)) {
	start := 0
	for i := 1; i <= len(text); i++ {
		if i == len(text) || i-start == maxPiece || (isSpace(text[i]) && !isSpace(text[i-1])) {
			f(text[start:i])
			start = i
		}
	}
}

// Count is the number of tokens in text.
func Count(text string) int {
	n := 0
	pieces(text, func(string) { n++ })
	return n
}

func (t *tokenizer) id(piece string) int {
	h := fnv.New32a()
	h.Write([]byte(piece))
	return int(h.Sum32() % uint32(t.vocab))
}

// Tokenize returns the ids of text's pieces and remembers them for Detokenize.
func (t *tokenizer) Tokenize(text string) []int {
	ids := []int{}
	t.mu.Lock()
	defer t.mu.Unlock()
	pieces(text, func(p string) {
		id := t.id(p)
		if len(t.known) < maxKnown {
			if _, ok := t.known[id]; !ok {
				t.known[id] = p
			}
		}
		ids = append(ids, id)
	})
	return ids
}

// Detokenize turns ids back into text. An id outside the vocabulary is an error (as in vLLM); an id
// the simulator never produced nor saw decodes to "<|id|>".
func (t *tokenizer) Detokenize(ids []int) (string, error) {
	var b strings.Builder
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, id := range ids {
		if id < 0 || id >= t.vocab {
			return "", fmt.Errorf("tokens[%d]: token id %d is out of vocabulary (size %d)", i, id, t.vocab)
		}
		if p, ok := t.known[id]; ok {
			b.WriteString(p)
		} else {
			fmt.Fprintf(&b, "<|%d|>", id)
		}
	}
	return b.String(), nil
}

// outputWords are the words generated text is made of: " " + 1–3 letters, each one token.
var outputWords = func() []string {
	cons, vow := "bcdfgklmnprstvz", "aeiou"
	var ws []string
	for _, c := range cons {
		for _, v := range vow {
			ws = append(ws, " "+string(c)+string(v))
			for _, e := range "nrst" {
				ws = append(ws, " "+string(c)+string(v)+string(e))
			}
		}
	}
	return ws
}()

// chatPrompt renders messages the way a ChatML template does (Qwen's), generation prompt included.
// Both the chat endpoint and /tokenize with messages count tokens on this text.
func chatPrompt(msgs []chatMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.Role + "\n" + m.text + "<|im_end|>\n")
	}
	b.WriteString("<|im_start|>assistant\n")
	return b.String()
}
