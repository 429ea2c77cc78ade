//go:build !linux

package load

import (
	"context"
	"errors"
)

// eventLoopBuilt says whether this build has the event-loop reader: off Linux, net/http reads streams.
const eventLoopBuilt = false

type evReader struct{}

func newEvReader(*client, endpointURL, int) (*evReader, error) {
	return nil, errors.New("the event-loop reader is built on Linux only")
}

func (*evReader) describe() string                                             { return "" }
func (*evReader) close()                                                       {}
func (*evReader) prewarm(context.Context, int)                                 {}
func (*evReader) do(context.Context, context.CancelCauseFunc, []byte, *Record) {}
