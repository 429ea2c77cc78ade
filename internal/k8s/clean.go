package k8s

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuvet/gpuvet/internal/config"
)

// Clean deletes every namespace a gpuvet run left (all runs, or only runID), found by the run label,
// and what those runs left in the kept cache's namespaces, and waits until each is gone. With
// cache, it also deletes the cache namespaces (their PVCs with them). cacheNS is
// kubernetes.cache_namespace ("" none): one gpuvet did not create carries no cache label, so it is
// named to have the runs' objects in it deleted; it stays. It returns what it deleted.
func Clean(ctx context.Context, cl *Cluster, runID string, cache bool, wait time.Duration, cacheNS string) ([]string, error) {
	cs := cl.Client
	nss, err := namespacesBy(ctx, cs, runSelectors(runID)...)
	if err != nil {
		return nil, fmt.Errorf("listing gpuvet namespaces: %w", err)
	}
	caches, err := CacheNamespaces(ctx, cs)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var done []string
	withRuns := caches
	if cacheNS != "" && !slices.Contains(caches, cacheNS) && !config.ClusterNamespace(cacheNS) {
		withRuns = append(slices.Clone(caches), cacheNS)
	}
	for _, ns := range withRuns {
		if err := DeleteRunObjects(ctx, cs, cl.Dynamic, ns, runID); err != nil {
			return done, fmt.Errorf("runs' objects in the cache namespace %s: %w", ns, err)
		}
	}
	for _, ns := range nss {
		if err := DeleteNamespace(ctx, cs, ns); err != nil {
			return done, fmt.Errorf("namespace %s: %w", ns, err)
		}
		done = append(done, "namespace "+ns)
	}
	if cache {
		for _, ns := range caches {
			if err := DeleteNamespace(ctx, cs, ns); err != nil {
				return done, fmt.Errorf("cache namespace %s: %w", ns, err)
			}
			done = append(done, "cache namespace "+ns+" (its PVCs with it)")
		}
	}
	return done, nil
}

// DeleteRunObjects deletes what a run (every run when runID is "") put in a namespace it does not
// own (the kept cache's): its Jobs, pods, Secrets and Dynamo deployments, by the run label, and
// waits until its pods are gone (their GPUs free). The PVCs stay.
func DeleteRunObjects(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, ns, runID string) error {
	sels := runSelectors(runID)
	bg := metav1.DeletePropagationBackground
	var errs []error
	for _, sel := range sels {
		lo := metav1.ListOptions{LabelSelector: sel}
		errs = append(errs,
			ignoreNotFound(cs.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, lo)),
			ignoreNotFound(cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, lo)),
			ignoreNotFound(cs.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, lo)))
		if dyn != nil { // a cluster without Dynamo's CRD answers NotFound
			err := dyn.Resource(DynamoGVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, lo)
			if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var left []string
	over, err := pollUntil(ctx, func() (bool, error) {
		left = nil
		for _, sel := range sels {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return true, ignoreNotFound(err)
			}
			for _, p := range pods.Items {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, nil
	})
	if over {
		return fmt.Errorf("%d pod(s) still there after the wait (first: %s)", len(left), left[0])
	}
	return err
}

// legacyDomain is the label domain before 2026-12 (now Domain): what such a gpuvet left carries
// legacyRun and legacyCache, so `gpuvet clean` selects by both. Drop them once no cluster can hold
// such leftovers (a kept cache namespace can, for long).
const (
	legacyDomain = "gpuvet.dev/"
	legacyRun    = legacyDomain + "run-id"
	legacyCache  = legacyDomain + "model-cache"
)

// runSelectors select what a run left (every run's with runID ""): gpuvet's managed-by label, with
// the run's id under LabelRun or legacyRun.
func runSelectors(runID string) []string {
	own := LabelManagedBy + "=" + ManagedBy
	if runID == "" {
		return []string{own}
	}
	return []string{own + "," + LabelRun + "=" + runID, own + "," + legacyRun + "=" + runID}
}

// namespacesBy lists the namespaces any of selectors selects, each once, in the order found.
func namespacesBy(ctx context.Context, cs kubernetes.Interface, selectors ...string) ([]string, error) {
	var out []string
	for _, sel := range selectors {
		l, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, err
		}
		for _, ns := range l.Items {
			if !slices.Contains(out, ns.Name) {
				out = append(out, ns.Name)
			}
		}
	}
	return out, nil
}

// CacheNamespaces are the namespaces that keep gpuvet's model cache (kubernetes.cache_namespace).
func CacheNamespaces(ctx context.Context, cs kubernetes.Interface) ([]string, error) {
	out, err := namespacesBy(ctx, cs, LabelCache+"=true", legacyCache+"=true")
	if err != nil {
		return nil, fmt.Errorf("listing gpuvet's cache namespaces: %w", err)
	}
	return out, nil
}
