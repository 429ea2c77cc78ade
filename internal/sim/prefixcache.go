package sim

import (
	"container/list"
	"hash/fnv"
)

// prefixCache is vLLM V1's automatic prefix caching in miniature: every full KV block of a prompt
// is kept under a hash chained over every block before it, as soon as it is computed, so a prompt
// that starts with the same full blocks as another skips their prefill. A block a running sequence
// holds stays; a freed one (its sequence finished or was preempted) stays cached in the free space
// until an allocation reuses it, the least recently freed first, as V1's free-block queue: so a
// preempted sequence finds what it computed unless the blocks were reused since. (A hit's blocks
// are counted against the sequence's own KV here rather than shared: the KV pressure of shared
// prefixes is overstated, never their hits.)
type prefixCache struct {
	at   map[uint64]*cachedBlock
	free *list.List // of uint64: cached blocks no sequence holds, most recently freed at the front
}

type cachedBlock struct {
	refs int           // running sequences holding it
	elem *list.Element // its place in free while refs == 0
}

func newPrefixCache() *prefixCache {
	return &prefixCache{at: map[uint64]*cachedBlock{}, free: list.New()}
}

// lookup counts the leading blocks of a prompt the cache holds.
func (c *prefixCache) lookup(blocks []uint64) int {
	for n, h := range blocks {
		if _, ok := c.at[h]; !ok {
			return n
		}
	}
	return len(blocks)
}

// hold takes the blocks for a running sequence: cached ones leave the free list, new ones are kept.
func (c *prefixCache) hold(blocks []uint64) {
	for _, h := range blocks {
		b, ok := c.at[h]
		if !ok {
			b = &cachedBlock{}
			c.at[h] = b
		}
		if b.refs == 0 && b.elem != nil {
			c.free.Remove(b.elem)
			b.elem = nil
		}
		b.refs++
	}
}

// release gives a sequence's blocks back: those no one else holds join the free list, the last
// block first, so that an allocation reuses a prompt's tail before its head (as V1 frees them).
func (c *prefixCache) release(blocks []uint64) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b, ok := c.at[blocks[i]]
		if !ok || b.refs == 0 {
			continue
		}
		if b.refs--; b.refs == 0 {
			b.elem = c.free.PushFront(blocks[i])
		}
	}
}

// fit evicts the least recently freed blocks until the free list fits in the engine's free blocks:
// an allocation took the rest.
func (c *prefixCache) fit(freeBlocks int) {
	for c.free.Len() > max(freeBlocks, 0) {
		old := c.free.Back()
		delete(c.at, old.Value.(uint64))
		c.free.Remove(old)
	}
}

// blockHashes are the chained hashes of text's full blocks of bs tokens (the simulator's
// tokenizer's pieces): block k's hash covers every token before its end, as vLLM's block hash
// covers its parent's, so two prompts share block k only when they share all tokens up to it.
func blockHashes(text string, bs int) []uint64 {
	var out []uint64
	h := fnv.New64a()
	n := 0
	pieces(text, func(p string) {
		h.Write([]byte(p))
		h.Write([]byte{0})
		if n++; n%bs == 0 {
			out = append(out, h.Sum64())
		}
	})
	return out
}
