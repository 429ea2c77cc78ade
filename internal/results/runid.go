package results

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// NewRunID is a run id unique even for runs started in the same second: the UTC time and 8 random
// hex digits (20261201T103000Z-3fa9c1d2). Every backend names its run this way, and every object a
// run creates (manifest, remote folder, VM, namespace) carries it, so two runs never touch each other.
func NewRunID(t time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}
