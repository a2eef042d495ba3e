package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/netclass-dev/netclass/shim/multus"
)

// Listers implements API from informer caches: resolving a destination makes
// no API call, whatever the number of destinations, selectors or pods, and a
// slow or huge tenant namespace cannot stall a Prepare.
type Listers struct {
	NamespaceLister corelisters.NamespaceLister
	PodLister       corelisters.PodLister
	ClaimLister     resourcelisters.ResourceClaimLister
}

// NewListers registers, on a factory of cluster-wide informers, the pods,
// namespaces and ResourceClaims resolution reads. Pods are cached with their
// metadata only (labels, name, UID): resolution needs nothing else, and a
// cluster's pods would otherwise cost every node their whole specs. The
// factory must be started, and synced, by the caller.
func NewListers(f informers.SharedInformerFactory) (Listers, error) {
	pods := f.Core().V1().Pods()
	if err := pods.Informer().SetTransform(metadataOnly); err != nil {
		return Listers{}, fmt.Errorf("pod informer transform: %w", err)
	}
	return Listers{
		NamespaceLister: f.Core().V1().Namespaces().Lister(),
		PodLister:       pods.Lister(),
		ClaimLister:     f.Resource().V1().ResourceClaims().Lister(),
	}, nil
}

// metadataOnly keeps what resolution reads of a pod: its metadata, its
// containers' ports, its primary addresses (status.podIPs and
// hostNetwork: the default network's peers) and what its network-status
// says of its NAD networks (compactStatus).
func metadataOnly(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, Labels: p.Labels, ResourceVersion: p.ResourceVersion,
	}}
	out.Status.PodIPs, out.Status.Phase, out.Spec.HostNetwork = p.Status.PodIPs, p.Status.Phase, p.Spec.HostNetwork
	if st, ok := compactStatus(p.Annotations[multus.AnnotationNetworkStatus]); ok { // the pod's addresses on NAD networks
		out.Annotations = map[string]string{multus.AnnotationNetworkStatus: st}
	}
	for _, c := range p.Spec.Containers { // named ports of NetworkPolicy egress rules
		if len(c.Ports) > 0 {
			out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
		}
	}
	return out, nil
}

var _ cache.TransformFunc = metadataOnly

// maxStatusEntries bounds the network-status entries kept of a pod.
const maxStatusEntries = 64

// compactStatus is what resolution reads of a pod's network-status (its
// secondary entries' NAD names and at most MaxNADAddressesPerPod addresses
// each, those that parse, re-formatted: the first maxStatusEntries
// entries), re-encoded: whoever may
// update a pod writes the annotation, up to 256 KiB, which every node's
// cache of the cluster's pods would otherwise keep whole. ok is false for
// none, or one that does not decode (it names no address either way).
func compactStatus(value string) (string, bool) {
	entries, err := multus.ParseStatus(value)
	if err != nil || len(entries) == 0 {
		return "", false
	}
	var kept []multus.Status
	for _, e := range entries {
		if e.Default || len(e.Name) > 63+1+253 {
			continue // the primary network's, or no NAD's name
		}
		k := multus.Status{Name: e.Name}
		for _, ip := range e.IPs {
			if a, err := netip.ParseAddr(ip); err == nil && len(k.IPs) < MaxNADAddressesPerPod {
				k.IPs = append(k.IPs, a.String()) // not the string as written: any length
			}
		}
		kept = append(kept, k)
		if len(kept) == maxStatusEntries {
			break
		}
	}
	b, err := json.Marshal(kept)
	return string(b), err == nil && len(kept) > 0
}

// Namespaces lists cached namespaces by label.
func (l Listers) Namespaces(_ context.Context, sel labels.Selector) ([]corev1.Namespace, error) {
	list, err := l.NamespaceLister.List(sel)
	if err != nil {
		return nil, err
	}
	out := make([]corev1.Namespace, len(list))
	for i, n := range list {
		out[i] = *n
	}
	return out, nil
}

// Pods lists a namespace's cached pods by label.
func (l Listers) Pods(_ context.Context, namespace string, sel labels.Selector) ([]corev1.Pod, error) {
	list, err := l.PodLister.Pods(namespace).List(sel)
	if err != nil {
		return nil, err
	}
	out := make([]corev1.Pod, len(list))
	for i, p := range list {
		out[i] = *p
	}
	return out, nil
}

// Claims lists a namespace's cached ResourceClaims.
func (l Listers) Claims(_ context.Context, namespace string) ([]resourceapi.ResourceClaim, error) {
	list, err := l.ClaimLister.ResourceClaims(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]resourceapi.ResourceClaim, len(list))
	for i, c := range list {
		out[i] = *c
	}
	return out, nil
}
