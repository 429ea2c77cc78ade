package engine

import (
	"net/http"
	"testing"
	"unicode/utf8"
)

// FuzzParseReply: any answer to the readiness completion (an engine, a proxy in front of it, a
// half-started server) is read or refused without panic; accepted only with status 200 and at
// least one generated token, and a refusal quotes at most 200 characters of the body.
func FuzzParseReply(f *testing.F) {
	for _, b := range []string{
		`{"choices":[{"message":{"content":"OK"}}],"usage":{"completion_tokens":2}}`,
		`{"choices":[{"message":{"content":null,"reasoning_content":"hmm"}}]}`,
		`{"choices":[{"message":{"content":""}}],"usage":{"completion_tokens":0}}`,
		`{"choices":[]}`, `<html>502 Bad Gateway</html>`, `{"choices":[{"message":{"content":1}}]}`,
	} {
		f.Add(200, []byte(b))
	}
	f.Add(500, []byte(`{"object":"error","message":"x"}`))
	f.Fuzz(func(t *testing.T, status int, b []byte) {
		r, err := parseReply(status, b)
		if err != nil {
			if n := utf8.RuneCountInString(err.Error()); n > 260 {
				t.Fatalf("error of %d characters: the body is not bounded", n)
			}
			return
		}
		if status != http.StatusOK || r.Tokens < 1 {
			t.Fatalf("accepted status %d with %d tokens", status, r.Tokens)
		}
	})
}
