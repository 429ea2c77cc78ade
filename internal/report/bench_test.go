package report

import (
	"io"
	"testing"
)

// BenchmarkRenderHTMLLarge renders the 8 GPUs × 3 models × 2 environments report (no I/O).
func BenchmarkRenderHTMLLarge(b *testing.B) {
	s := buildSample(largeSample())
	b.ReportAllocs()
	for b.Loop() {
		if err := RenderHTML(s, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJUnitAndPrometheusLarge builds both machine exports of the large run.
func BenchmarkJUnitAndPrometheusLarge(b *testing.B) {
	s := buildSample(largeSample())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := JUnit(s); err != nil {
			b.Fatal(err)
		}
		if _, err := Prometheus(s); err != nil {
			b.Fatal(err)
		}
	}
}
