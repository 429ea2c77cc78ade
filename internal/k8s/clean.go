package k8s

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Clean deletes every namespace a gpuvet run left (all runs, or only runID), finding them by the
// run label rather than by name, and waits until each is gone. It returns the names it deleted.
func Clean(ctx context.Context, cs kubernetes.Interface, runID string, wait time.Duration) ([]string, error) {
	sel := LabelManagedBy + "=" + ManagedBy
	if runID != "" {
		sel += "," + LabelRun + "=" + runID
	}
	l, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing gpuvet namespaces: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var done []string
	for _, ns := range l.Items {
		if err := DeleteNamespace(ctx, cs, ns.Name); err != nil {
			return done, fmt.Errorf("namespace %s: %v", ns.Name, err)
		}
		done = append(done, ns.Name)
	}
	return done, nil
}
