package k8s

import (
	batchv1 "k8s.io/api/batch/v1"
	"sort"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func intstrPort() intstr.IntOrString { return intstr.FromInt32(EnginePort) }

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type jobObject = *batchv1.Job
