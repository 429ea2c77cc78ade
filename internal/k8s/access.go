package k8s

import (
	"context"
	"fmt"
	"strings"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Permission is one verb on one resource that a run needs.
type Permission struct {
	Verb        string
	Group       string // "" core, "batch", "storage.k8s.io"
	Resource    string
	Subresource string
	Namespaced  bool // checked in the run's namespace, else cluster-wide
	// InCache: checked in the kept cache's namespace (kubernetes.cache_namespace) instead.
	InCache bool
}

func (p Permission) String() string {
	r := p.Resource
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	if p.Group != "" {
		r += "." + p.Group
	}
	return p.Verb + " " + r
}

// Needs lists what a run asks of the API: the namespace, the node and pod listings that choose
// nodes, and the objects it creates, polls, reads logs of and deletes in the namespace. With a kept
// cache, the pods that mount it run in the cache's namespace: the same rights there, plus its PVCs
// and deleting the run's Secret.
func Needs(cache, secret, dynamo, kept bool) []Permission {
	p := []Permission{
		{Verb: "create", Resource: "namespaces"}, {Verb: "delete", Resource: "namespaces"}, {Verb: "get", Resource: "namespaces"},
		{Verb: "list", Resource: "nodes"}, {Verb: "list", Resource: "pods"},
	}
	where := []bool{false} // InCache
	if kept {
		where = append(where, true)
	}
	for _, in := range where {
		for _, v := range []string{"create", "get", "list", "watch", "delete", "deletecollection"} {
			p = append(p, Permission{Verb: v, Resource: "pods", Namespaced: true, InCache: in}, Permission{Verb: v, Group: "batch", Resource: "jobs", Namespaced: true, InCache: in})
		}
		p = append(p, Permission{Verb: "get", Resource: "pods", Subresource: "log", Namespaced: true, InCache: in})
	}
	podNS := kept // the namespace of the pods that mount the cache
	if cache {
		p = append(p, Permission{Verb: "list", Group: "storage.k8s.io", Resource: "storageclasses"},
			Permission{Verb: "create", Resource: "persistentvolumeclaims", Namespaced: true, InCache: kept},
			Permission{Verb: "get", Resource: "persistentvolumeclaims", Namespaced: true, InCache: kept})
	}
	if secret {
		p = append(p, Permission{Verb: "create", Resource: "secrets", Namespaced: true, InCache: podNS})
		if kept {
			p = append(p, Permission{Verb: "deletecollection", Resource: "secrets", Namespaced: true, InCache: true})
		}
	}
	if dynamo {
		for _, v := range []string{"create", "get", "delete"} {
			p = append(p, Permission{Verb: v, Group: "nvidia.com", Resource: "dynamographdeployments", Namespaced: true, InCache: podNS})
		}
		p = append(p, Permission{Verb: "get", Resource: "services", Namespaced: true, InCache: podNS})
	}
	return p
}

// CheckAccess asks the API server (SelfSubjectAccessReview) whether the caller has each permission,
// in the run's namespace or the kept cache's (cacheNS), and names every missing one.
func CheckAccess(ctx context.Context, cs kubernetes.Interface, namespace, cacheNS string, needs []Permission) error {
	var missing []string
	for _, p := range needs {
		ra := &authv1.ResourceAttributes{Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource}
		if p.Namespaced {
			ra.Namespace = namespace
			if p.InCache {
				ra.Namespace = cacheNS
			}
		}
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("checking access (%s): %w", p, err)
		}
		if !r.Status.Allowed {
			where := "cluster-wide"
			if p.Namespaced {
				where = "in namespace " + ra.Namespace
			}
			missing = append(missing, fmt.Sprintf("%s (%s)", p, where))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing RBAC permission: %s: grant them to this user or service account (a ClusterRole with these verbs), nothing was created",
			strings.Join(missing, ", "))
	}
	return nil
}
