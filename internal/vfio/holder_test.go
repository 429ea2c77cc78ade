package vfio

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/fleet"
)

// scripted answers inspect with one vfio GPU in IOMMU group 7 and fails the holder check; every
// other script is logged (a change on the node).
type scripted struct{ ran []string }

func (s *scripted) Run(_ context.Context, script string) (string, error) {
	switch {
	case strings.Contains(script, "/bus/pci/devices/*"):
		return "0000:41:00.0|vfio-pci|vfio-pci|vfio-pci|7\n", nil
	case strings.Contains(script, "-lname"):
		return "", errors.New("Process exited with status 255: connection lost")
	}
	s.ran = append(s.ran, script)
	return "", nil
}

// A GPU whose holders cannot be read may be a running VM's: it is never released.
func TestReleaseRefusesWhenHoldersUnknown(t *testing.T) {
	r := &scripted{}
	_, err := Begin(context.Background(), r, Paths{}, nil, nil, fleet.Object{}, "run1", nil)
	if err == nil || !strings.Contains(err.Error(), "0000:41:00.0") {
		t.Fatalf("release with the holder check failing: %v", err)
	}
	for _, s := range r.ran {
		if strings.Contains(s, "unbind") || strings.Contains(s, "driverctl") {
			t.Fatalf("changed the node anyway: %s", s)
		}
	}
}
