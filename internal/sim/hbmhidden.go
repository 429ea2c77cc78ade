package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// hbmHidden is one GPU whose memory the engine sees only part of (FleetConfig.HBMHidden): as when
// pages are retired, a MIG slice or another process holds the rest. Its KV cache is smaller; its
// compute is not. gpu < 0: none.
type hbmHidden struct {
	gpu  int
	frac float64 // the share of its memory hidden, in (0, 1)
}

// defaultHiddenShare is what "GPU" alone hides: half the memory.
const defaultHiddenShare = 0.5

// parseHBMHidden reads "GPU" or "GPU:SHARE" (SHARE in (0, 1), default 0.5); "" is none.
func parseHBMHidden(s string, count int) (hbmHidden, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return hbmHidden{gpu: -1}, nil
	}
	g, share, hasShare := strings.Cut(s, ":")
	n, err := strconv.Atoi(g)
	frac := defaultHiddenShare
	if hasShare && err == nil {
		frac, err = strconv.ParseFloat(share, 64)
	}
	if err != nil || n < 0 || n >= count || !(frac > 0 && frac < 1) {
		return hbmHidden{}, fmt.Errorf("hbm hidden %q: want GPU[:SHARE] with GPU 0–%d and SHARE in (0, 1) (default 0.5), e.g. 1 or 1:0.5", s, count-1)
	}
	return hbmHidden{gpu: n, frac: frac}, nil
}

// VisibleMemory is the share of GPU i's memory its engine can use (1: all of it).
func (f *Fleet) VisibleMemory(i int) float64 {
	if f.hbm.gpu == i { // gpu -1: none
		return 1 - f.hbm.frac
	}
	return 1
}
