package results

import "errors"

// A disruption is work stopped by something that says nothing about the hardware (a pod preempted
// or evicted, a node drained under the run, a job cancelled): it never fails a GPU, the work it
// stopped is inconclusive ("run again"), and what was measured before it stays. The error carries it
// (Disrupted); the result records it in its Disruption field for the judge.

// Disrupted is an error that stopped work for a reason outside the hardware; Disruption says
// what ("pod gpuvet-engine-0 preempted by the scheduler (PreemptionByScheduler): …").
type Disrupted interface {
	error
	Disruption() string
}

// DisruptionOf is the disruption an error carries ("" when none does).
func DisruptionOf(err error) string {
	var d Disrupted
	if errors.As(err, &d) {
		return d.Disruption()
	}
	return ""
}

// Layered is an error whose maker knows the layer it belongs to (a backend's Job that gave no
// result: LayerInfra); the result records it in its ErrorLayer field for the judge.
type Layered interface {
	error
	Layer() string
}

type layeredError struct {
	layer string
	err   error
}

func (e layeredError) Error() string { return e.err.Error() }
func (e layeredError) Unwrap() error { return e.err }
func (e layeredError) Layer() string { return e.layer }

// InLayer marks err as layer's (nil stays nil).
func InLayer(layer string, err error) error {
	if err == nil {
		return nil
	}
	return layeredError{layer, err}
}

// LayerOfError is the layer an error carries ("" when none does: the judge reads its words).
func LayerOfError(err error) string {
	var l Layered
	if errors.As(err, &l) {
		return l.Layer()
	}
	return ""
}
