package gpu

import (
	"os"
	"strings"
	"testing"
)

// A fresh clone's first `go run` must print no compiler warnings. go-nvml's cgo wrappers of
// deprecated NVML functions warn ~160 times; the copy in third_party/go-nvml carries the flag that
// silences them, and go.mod must use that copy. (CI checks the real thing: its first build on a
// clean machine must print nothing; a fresh-cache build here takes minutes.)
func TestFreshBuildIsQuiet(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "github.com/NVIDIA/go-nvml => ./third_party/go-nvml") {
		t.Errorf("go.mod does not replace go-nvml with third_party/go-nvml")
	}
	src, err := os.ReadFile("../../third_party/go-nvml/pkg/nvml/nvml.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "#cgo CFLAGS: -Wno-deprecated-declarations") {
		t.Errorf("third_party/go-nvml/pkg/nvml/nvml.go lost its -Wno-deprecated-declarations")
	}
}
