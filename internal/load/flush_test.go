package load

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A real detokeniser holds back text it cannot yet decode (a partial UTF-8 sequence, a word piece)
// and sends it in one last chunk once the request finishes, carrying no token of its own: vLLM
// does, and so does gpuvet's transformers front. That chunk is not a token past max_tokens. On the
// H200 the load called about half of such requests over_max_tokens and failed a healthy GPU.
func TestFinalFlushChunkIsNotOverMaxTokens(t *testing.T) {
	for _, continuous := range []bool{false, true} {
		for _, reader := range readers {
			t.Run(fmt.Sprintf("continuous=%v/%s", continuous, reader), func(t *testing.T) {
				h := startHostile(t, func(c net.Conn, _, maxTokens int, _ *http.Request) bool {
					usage := func(k int) string {
						if !continuous {
							return ""
						}
						return fmt.Sprintf(`,"usage":{"prompt_tokens":8,"completion_tokens":%d}`, k)
					}
					c.Write([]byte(sseHead))
					for k := 1; k <= maxTokens; k++ {
						writeEvent(c, tokenChunk(usage(k)))
					}
					writeEvent(c, `{"choices":[{"index":0,"text":"\ufffd","finish_reason":"length"}]`+usage(maxTokens)+`}`)
					writeEvent(c, fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":%d}}`, maxTokens))
					writeEvent(c, "[DONE]")
					c.Write([]byte("0\r\n\r\n"))
					return true
				})
				o := hostileOpts(h.url(), reader, 4, results.LoadConfig{Profile: "concurrency", Concurrency: 2, MaxRequests: 6})
				o.RecordsPath = t.TempDir() + "/r.jsonl"
				l, _ := Run(context.Background(), o)
				if l == nil || len(l.Runs) != 1 {
					t.Fatalf("no load measured: %+v", l)
				}
				r := l.Runs[0]
				if len(r.Errors) != 0 || r.Requests.Successful < 6 {
					t.Fatalf("errors %v, requests %+v: want every request successful", r.Errors, r.Requests)
				}
				for _, rec := range readRecordsT(t, o.RecordsPath) {
					if rec.OutputTokens != 4 {
						t.Fatalf("record %+v: want the 4 tokens generated", rec)
					}
				}
			})
		}
	}
}
