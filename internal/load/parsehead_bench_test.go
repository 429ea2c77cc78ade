package load

import "testing"

// BenchmarkParseHead is the head of a response as vLLM sends it for a stream, parsed once per
// request on the event loop's hot path.
func BenchmarkParseHead(b *testing.B) {
	head := []byte("HTTP/1.1 200 OK\r\ndate: Mon, 01 Jan 2024 00:00:00 GMT\r\nserver: uvicorn\r\n" +
		"content-type: text/event-stream; charset=utf-8\r\nConnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n")
	b.ReportAllocs()
	var p respParser
	for b.Loop() {
		p.reset()
		if err := p.parseHead(head); err != nil {
			b.Fatal(err)
		}
	}
}
