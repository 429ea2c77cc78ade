package config

import (
	"maps"
	"slices"
)

// With is the plan with key=value overrides on top, as --set applies them, checked as Load checks a
// plan; p is unchanged. A fleet's nested run (opennebula's bare-metal re-measure) judges with it.
func (p *Plan) With(sets ...string) (*Plan, error) {
	q := &Plan{Sources: maps.Clone(p.Sources), Notes: slices.Clone(p.Notes), EndpointURLKey: p.EndpointURLKey,
		tree: deepCopy(p.tree).(tree)}
	if err := q.applySets(sets); err != nil {
		return nil, err
	}
	if err := q.resolve(); err != nil {
		return nil, err
	}
	// p's tree holds opennebula.endpoint without its user:password@; the client dials p's whole URL
	// unless an override named another front-end.
	if q.Config.OpenNebula.Endpoint == p.Config.OpenNebula.Endpoint {
		q.OpenNebulaEndpoint = p.OpenNebulaEndpoint
	}
	return q, nil
}
