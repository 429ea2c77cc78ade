package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A capture that says attached_gpus=2 but lists one GPU, or three, is refused: the file states its
// count twice and the two must agree.
func TestParseCrossChecksAttachedGPUs(t *testing.T) {
	b, err := os.ReadFile("testdata/h200x2.xml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	first := strings.Index(doc, "<gpu ")
	end := strings.Index(doc, "</gpu>") + len("</gpu>")
	oneGPU := doc[first:end]
	for name, d := range map[string]string{
		"fewer": doc[:first] + doc[end:],
		"more":  doc[:end] + oneGPU + doc[end:],
		"words": strings.Replace(doc, "<attached_gpus>2<", "<attached_gpus>two<", 1),
	} {
		if _, err := ParseNvidiaSMIXML([]byte(d), nil); err == nil || !strings.Contains(err.Error(), "attached_gpus") {
			t.Errorf("%s: %v, want an attached_gpus mismatch error", name, err)
		}
	}
	if g, err := ParseNvidiaSMIXML(b, nil); err != nil || len(g) != 2 {
		t.Fatalf("the real capture: %d GPUs, %v", len(g), err)
	}
}

// A file far larger than any capture is refused before it is parsed.
func TestFromNvidiaSMIXMLBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.xml")
	f, _ := os.Create(p)
	f.Truncate(65 << 20) // sparse: costs no disk
	f.Close()
	if _, err := FromNvidiaSMIXML(p, nil); err == nil || !strings.Contains(err.Error(), "more than 64 MiB") {
		t.Fatalf("want a size error, got %v", err)
	}
}
