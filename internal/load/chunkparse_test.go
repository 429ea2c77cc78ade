package load

import (
	"testing"
)

// The shapes vLLM, SGLang and the simulator send: each must take the fast path (no fallback), and
// read the same as encoding/json reads it.
var realChunks = []string{
	`{"id":"cmpl-1","object":"text_completion","created":1732000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`,
	`{"id":"cmpl-1","object":"text_completion","created":1732000000,"model":"m","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":512,"total_tokens":768,"completion_tokens":256}}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word","reasoning_content":null},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":512,"total_tokens":600,"completion_tokens":88}}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":512,"total_tokens":768,"completion_tokens":256,"prompt_tokens_details":{"cached_tokens":0}}}`,
	`{"choices":[{"delta":{"content":"line\nbreak \"quoted\" tab\t"}}]}`,
	`{"choices":[{"delta":{"reasoning":"héllo wörld ✓"}}]}`,
	` { "choices" : [ { "text" : "a" , "finish_reason" : "stop" } ] } ` + "\n",
}

func TestFastChunkTakesRealShapes(t *testing.T) {
	for _, s := range realChunks {
		fast, ok := fastChunk([]byte(s))
		if !ok {
			t.Errorf("fast path refused a real chunk: %s", s)
			continue
		}
		slow, err := slowChunk([]byte(s))
		if err != nil || fast != slow {
			t.Errorf("%s:\nfast %+v\nslow %+v %v", s, fast, slow, err)
		}
	}
}

func TestFastChunkRefusesWhatItCannotReadExactly(t *testing.T) {
	for _, s := range []string{
		`{"Choices":[{"text":"a"}]}`,                           // encoding/json matches keys case-insensitively
		`{"choices":[{"text":"a"}],"choices":[]}`,              // repeats: encoding/json's merge rules
		`{"choices":[{"text":"\u00e9"}]}`,                      // \u escapes
		`{"choices":[{"text":"` + "\xff" + `"}]}`,              // invalid UTF-8 is replaced by U+FFFD
		`{"usage":{"prompt_tokens":-1,"completion_tokens":1}}`, // negative: an error, encoding/json's to word
		`{"usage":{"prompt_tokens":1.0}}`,                      // not an int
		`{"error":{"message":"x"}}`,                            // errors
		`{"choices":[{"text":"a"}]} x`,                         // trailing garbage
		`{"choices":[{"text":"a"}]`,                            // truncated
		`null`,
	} {
		if c, ok := fastChunk([]byte(s)); ok {
			t.Errorf("fast path accepted %s as %+v", s, c)
		}
	}
}

// FuzzChunkDifferential holds the fast path to encoding/json: whenever it answers, its answer is
// encoding/json's, and parseChunk as a whole errs exactly when encoding/json does.
func FuzzChunkDifferential(f *testing.F) {
	for _, s := range realChunks {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{"choices":[{"text":"a"}],"choices":null}`, `{"usage":{"prompt_tokens":null}}`,
		`{"choices":[null,{"delta":null}]}`, `{"error":null}`, `{"x":[1,-2.5e3,{"y":[true,false,null]}]}`,
		`{"choices":[{"finish_reason":"stop\/"}]}`, `{"choices":[{"delta":{"reasoning_content":"ab","content":"c","reasoning":null}}]}`, `{"usage":{"prompt_tokens":123456789012345678901}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		slow, serr := slowChunk(b)
		got, err := parseChunk(b)
		if (err != nil) != (serr != nil) {
			t.Fatalf("parseChunk err %v, encoding/json err %v", err, serr)
		}
		if err == nil && got != slow {
			t.Fatalf("parseChunk %+v, encoding/json %+v", got, slow)
		}
		if fast, ok := fastChunk(b); ok && (serr != nil || fast != slow) {
			t.Fatalf("fast path %+v accepted what encoding/json reads as %+v (err %v)", fast, slow, serr)
		}
	})
}

func BenchmarkParseChunkSlow(b *testing.B) {
	c := []byte(realChunks[3])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := slowChunk(c); err != nil {
			b.Fatal(err)
		}
	}
}
