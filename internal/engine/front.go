package engine

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TransformersFront is gpuvet's OpenAI-compatible front over transformers' continuous batching
// (kind transformers). It ships inside the binary so a fresh host needs only Python with torch,
// transformers and aiohttp.
//
//go:embed front/transformers_front.py
var TransformersFront []byte

// FrontFile is the name the front is written under, next to the engine logs.
const FrontFile = "gpuvet-transformers-front.py"

// writeFront writes the front script into dir when tmpl names {front}, and returns its path ("" when
// the template does not use it).
func writeFront(tmpl, dir string) (string, error) {
	if !strings.Contains(tmpl, "{front}") {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("writing the transformers front: %w", err)
	}
	p, err := filepath.Abs(filepath.Join(dir, FrontFile))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(p, TransformersFront, 0o644); err != nil {
		return "", fmt.Errorf("writing the transformers front: %w", err)
	}
	return p, nil
}
