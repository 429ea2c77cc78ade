package pipeline

import (
	"context"
	"sync"
	"time"
)

// blockWaitMax bounds one wait for the other GPUs at a synchronous block: past it the block starts
// alone, and the judge compares those GPUs by their intervals, not block by block.
const blockWaitMax = time.Minute

// blockSync lines up the synchronous blocks of one model's GPUs loaded at once: block b of each
// starts when every load still running reached it, so the blocks see the same drift and the judge
// takes the GPUs' gaps block by block. A load that ends (or never starts) leaves.
type blockSync struct {
	mu      sync.Mutex
	max     time.Duration         // the longest one wait (blockWaitMax)
	active  int                   // loads still taking part
	arrived map[int]int           // block → loads that reached it
	release map[int]chan struct{} // block → closed once every active load reached it
}

func newBlockSync(loads int) *blockSync {
	return &blockSync{max: blockWaitMax, active: loads, arrived: map[int]int{}, release: map[int]chan struct{}{}}
}

// wait returns when every active load reached block, ctx ends or s.max passes.
func (s *blockSync) wait(ctx context.Context, block int) {
	s.mu.Lock()
	s.arrived[block]++
	ch := s.releaseOf(block)
	s.check()
	s.mu.Unlock()
	t := time.NewTimer(s.max)
	defer t.Stop()
	select {
	case <-ch:
	case <-ctx.Done():
	case <-t.C:
	}
}

// leave takes a load out: the others wait for it no longer.
func (s *blockSync) leave() {
	s.mu.Lock()
	s.active--
	s.check()
	s.mu.Unlock()
}

// releaseOf is block's release channel (s.mu held).
func (s *blockSync) releaseOf(block int) chan struct{} {
	ch, ok := s.release[block]
	if !ok {
		ch = make(chan struct{})
		s.release[block] = ch
	}
	return ch
}

// check releases every block all active loads have reached (s.mu held).
func (s *blockSync) check() {
	for b, n := range s.arrived {
		ch := s.releaseOf(b)
		if n >= s.active {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	}
}
