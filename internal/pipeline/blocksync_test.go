package pipeline

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestBlockSyncReleasesABlockWhenEveryLoadReachedIt(t *testing.T) {
	s := newBlockSync(3)
	var mu sync.Mutex
	var order []string
	note := func(w string) { mu.Lock(); order = append(order, w); mu.Unlock() }
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.wait(context.Background(), 1)
			note("released")
		}()
	}
	time.Sleep(100 * time.Millisecond)
	note("third arrives")
	s.wait(context.Background(), 1) // the third: all three reached block 1
	wg.Wait()
	if len(order) != 3 || order[0] != "third arrives" {
		t.Fatalf("order %v: a block started before every load reached it", order)
	}
	// One load ends (its sweep stopped early): the other two no longer wait for it at block 2.
	s.leave()
	done := make(chan struct{})
	go func() { s.wait(context.Background(), 2); close(done) }()
	s.wait(context.Background(), 2)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("block 2 held for a load that left")
	}
}

func TestBlockSyncWaitIsBounded(t *testing.T) {
	s := newBlockSync(2)
	s.max = 50 * time.Millisecond
	start := time.Now()
	s.wait(context.Background(), 1) // the other load never comes
	if w := time.Since(start); w < 50*time.Millisecond || w > 5*time.Second {
		t.Fatalf("waited %v, want the bound", w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.max = time.Hour
	s.wait(ctx, 2) // a cancelled run does not wait
}
