package gpu

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// ansi matches the terminal escapes `nvidia-smi topo -m` puts around its header.
var ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// ParseTopoMatrix reads `nvidia-smi topo -m` and returns the path of every GPU pair (a < b), e.g.
// NV18 or PIX. Columns other than GPUs (NICs, CPU affinity) are ignored.
func ParseTopoMatrix(b []byte) ([]results.GPUPair, error) {
	var header []string
	rows := map[int][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := ansi.ReplaceAllString(sc.Text(), "")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "Legend") {
			if header != nil && len(rows) > 0 {
				break
			}
			continue
		}
		fields := splitTabs(line)
		if header == nil {
			if len(fields) > 0 && strings.HasPrefix(fields[0], "GPU") {
				header = fields
			}
			continue
		}
		n, ok := gpuLabel(fields[0])
		if !ok {
			continue // a NIC row
		}
		if _, dup := rows[n]; dup {
			return nil, fmt.Errorf("topo matrix: GPU%d has two rows", n)
		}
		rows[n] = fields[1:]
	}
	if header == nil || len(rows) == 0 {
		return nil, fmt.Errorf("topo matrix: no GPU header and rows found (want the output of `nvidia-smi topo -m`)")
	}
	col := map[int]int{} // GPU -> column
	for c, h := range header {
		if n, ok := gpuLabel(h); ok {
			col[n] = c
		}
	}
	var pairs []results.GPUPair
	for a := 0; a < len(rows); a++ {
		ra, ok := rows[a]
		if !ok {
			return nil, fmt.Errorf("topo matrix: no row for GPU%d (rows must be GPU0..GPU%d)", a, len(rows)-1)
		}
		for bIdx := a + 1; bIdx < len(rows); bIdx++ {
			c, ok := col[bIdx]
			if !ok || c >= len(ra) {
				return nil, fmt.Errorf("topo matrix: GPU%d's row has no GPU%d column", a, bIdx)
			}
			p := results.GPUPair{A: a, B: bIdx, Path: ra[c]}
			if n, err := strconv.Atoi(strings.TrimPrefix(p.Path, "NV")); err == nil && strings.HasPrefix(p.Path, "NV") {
				if n <= 0 || n > 1024 {
					return nil, fmt.Errorf("topo matrix: GPU%d–GPU%d path %q: want a link count 1–1024", a, bIdx, p.Path)
				}
				p.NVLinks = n
			} else if !knownPCIePath[p.Path] {
				return nil, fmt.Errorf("topo matrix: GPU%d–GPU%d path %q: want NV#, PIX, PXB, PHB, NODE or SYS", a, bIdx, p.Path)
			}
			pairs = append(pairs, p)
		}
	}
	return pairs, nil
}

var knownPCIePath = map[string]bool{"PIX": true, "PXB": true, "PHB": true, "NODE": true, "SYS": true, "SOC": true, "BOARD": true}

func splitTabs(line string) []string {
	var out []string
	for _, f := range strings.Split(line, "\t") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func gpuLabel(s string) (int, bool) {
	if !strings.HasPrefix(s, "GPU") {
		return 0, false
	}
	n, err := strconv.Atoi(s[3:])
	return n, err == nil && n >= 0 && n < 1024
}

var (
	nvlinkGPU  = regexp.MustCompile(`^GPU (\d+):`)
	nvlinkLink = regexp.MustCompile(`^Link (\d+):\s*(.*)$`)
)

// ParseNvLinkStatus reads `nvidia-smi nvlink -s`: each GPU's links, "26.562 GB/s" for an up link and
// "<inactive>" for a down one.
func ParseNvLinkStatus(b []byte) ([]results.GPULinks, error) {
	var out []results.GPULinks
	sc := bufio.NewScanner(bytes.NewReader(b))
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if m := nvlinkGPU.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			if n > 1023 {
				return nil, fmt.Errorf("nvlink status line %d: GPU %d out of range", ln, n)
			}
			out = append(out, results.GPULinks{GPU: n})
			continue
		}
		m := nvlinkLink.FindStringSubmatch(line)
		if m == nil {
			continue // e.g. "NVML: Unable to retrieve NVLink information as all links are inActive"
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("nvlink status line %d: a link before any \"GPU n:\" line", ln)
		}
		l, err := strconv.Atoi(m[1])
		if err != nil || l > 1023 {
			return nil, fmt.Errorf("nvlink status line %d: link number %q", ln, m[1])
		}
		link := results.NVLink{Link: l}
		val := strings.TrimSpace(m[2])
		if !strings.Contains(strings.ToLower(val), "inactive") {
			num, unit, _ := strings.Cut(val, " ")
			g, err := strconv.ParseFloat(num, 64)
			if err != nil || g < 0 || g > 1e4 || unit != "GB/s" {
				return nil, fmt.Errorf("nvlink status line %d: %q: want \"<GB> GB/s\" or \"<inactive>\"", ln, val)
			}
			link.Up, link.GBps = true, g
		}
		cur := &out[len(out)-1]
		cur.Links = append(cur.Links, link)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("nvlink status: no \"GPU n:\" line found (want the output of `nvidia-smi nvlink -s`)")
	}
	return out, nil
}

// FromLinkCaptures builds the interconnect from captured `nvidia-smi topo -m` and `nvidia-smi nvlink
// -s` files (either may be empty). The capture has no peer-access status and no error counters.
func FromLinkCaptures(topoPath, nvlinkPath string) (*results.Interconnect, error) {
	ic := &results.Interconnect{Source: "nvidia-smi"}
	if topoPath != "" {
		b, err := os.ReadFile(topoPath)
		if err != nil {
			return nil, fmt.Errorf("--nvidia-smi-topo: %w (want the output of `nvidia-smi topo -m` saved to a file)", err)
		}
		if ic.Pairs, err = ParseTopoMatrix(b); err != nil {
			return nil, fmt.Errorf("--nvidia-smi-topo %s: %w", topoPath, err)
		}
	}
	if nvlinkPath != "" {
		b, err := os.ReadFile(nvlinkPath)
		if err != nil {
			return nil, fmt.Errorf("--nvidia-smi-nvlink: %w (want the output of `nvidia-smi nvlink -s` saved to a file)", err)
		}
		if ic.Links, err = ParseNvLinkStatus(b); err != nil {
			return nil, fmt.Errorf("--nvidia-smi-nvlink %s: %w", nvlinkPath, err)
		}
	}
	ic.Notes = append(ic.Notes, "read from nvidia-smi captures: no peer-access status, no NVLink error counters, no bandwidth measured")
	return ic, nil
}

// WithLinks gives a source an interconnect read elsewhere (captured text beside a captured XML).
func WithLinks(src Source, ic *results.Interconnect) Source { return linked{src, ic} }

type linked struct {
	Source
	ic *results.Interconnect
}

func (l linked) Interconnect() (*results.Interconnect, error) {
	c := *l.ic
	return &c, nil
}
