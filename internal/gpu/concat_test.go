package gpu

import (
	"os"
	"strings"
	"testing"
)

// Two captures in one file (`nvidia-smi -q -x >> file` run twice) each state a consistent GPU
// count, so the count check passed and the first, older capture was read silently, the second
// ignored. The file is refused; XML comments and whitespace after the document are fine.
func TestConcatenatedCapturesAreRefused(t *testing.T) {
	b, err := os.ReadFile("testdata/h200-idle.xml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseNvidiaSMIXML(append(append([]byte(nil), b...), "\n<!-- saved by hand -->\n\n"...), nil); err != nil {
		t.Errorf("a comment after the document: %v", err)
	}
	twice := append(append([]byte(nil), b...), b...)
	_, err = ParseNvidiaSMIXML(twice, nil)
	if err == nil || !strings.Contains(err.Error(), "after") {
		t.Errorf("two captures in one file: err %v, want one saying what follows the document", err)
	}
	_, err = ParseNvidiaSMIXML(append(append([]byte(nil), b...), "<gpu>"...), nil)
	if err == nil {
		t.Error("an element after the document: no error")
	}
}

// `nvidia-smi -q -x -i 0` on a two-GPU host prints attached_gpus 2 beside one <gpu>: an honest
// capture of one GPU, which the error called "edited, cut or concatenated". It is still refused
// (every GPU is vetted), with what to run instead.
func TestCaptureOfOneGPUSaysToCaptureAll(t *testing.T) {
	b, err := os.ReadFile("testdata/h200x2.xml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	first := strings.Index(doc, "<gpu ")
	end := strings.Index(doc, "</gpu>") + len("</gpu>")
	_, err = ParseNvidiaSMIXML([]byte(doc[:first]+doc[end:]), nil)
	if err == nil || !strings.Contains(err.Error(), "-i") || strings.Contains(err.Error(), "edited") {
		t.Errorf("one GPU of two: %v", err)
	}
}
