package sim

import (
	"container/list"
	"hash/fnv"
)

// prefixCache is vLLM's automatic prefix caching in miniature: the KV blocks of prompts already
// computed are kept, keyed by a hash chained over every block before them, so a prompt that starts
// with the same full blocks as an earlier one skips their prefill. Cached blocks live in the KV
// cache's free space, so the cache holds at most the engine's KV blocks, least recently used
// evicted first. (A hit's blocks are counted against the sequence's own KV here rather than shared:
// the KV pressure of shared prefixes is overstated, never their hits.)
type prefixCache struct {
	capacity int
	order    *list.List // of uint64, most recently used at the front
	at       map[uint64]*list.Element
}

func newPrefixCache(capacity int) *prefixCache {
	return &prefixCache{capacity: capacity, order: list.New(), at: map[uint64]*list.Element{}}
}

// lookup counts the leading blocks of a prompt the cache holds, at most limit, touching them.
func (c *prefixCache) lookup(blocks []uint64, limit int) int {
	n := 0
	for _, h := range blocks[:min(limit, len(blocks))] {
		e, ok := c.at[h]
		if !ok {
			break
		}
		c.order.MoveToFront(e)
		n++
	}
	return n
}

// add keeps a computed prompt's blocks.
func (c *prefixCache) add(blocks []uint64) {
	for _, h := range blocks {
		if e, ok := c.at[h]; ok {
			c.order.MoveToFront(e)
			continue
		}
		c.at[h] = c.order.PushFront(h)
		for c.order.Len() > c.capacity {
			old := c.order.Back()
			delete(c.at, old.Value.(uint64))
			c.order.Remove(old)
		}
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
