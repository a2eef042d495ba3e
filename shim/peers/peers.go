// Package peers resolves the pod and namespace selectors of a NetworkQoS
// destination to the addresses the selected pods have on a network, as their
// claims' status reports them (selectors are resolved by netclass-dra
// before a rule reaches a plugin). The result is a snapshot taken when a pod
// is prepared.
package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
)

// API lists what resolution needs.
type API interface {
	Namespaces(ctx context.Context, sel labels.Selector) ([]corev1.Namespace, error)
	Pods(ctx context.Context, namespace string, sel labels.Selector) ([]corev1.Pod, error)
	Claims(ctx context.Context, namespace string) ([]resourceapi.ResourceClaim, error)
}

// Resolver implements render.Peers.
type Resolver struct {
	API API
	// Context bounds the API calls of one resolution.
	Context func() (context.Context, context.CancelFunc)
}

// Addresses returns the addresses on net of the pods the destination selects
// (podSelector in the NetworkQoS's namespace, or in the namespaces
// namespaceSelector selects).
func (r Resolver) Addresses(namespace string, to ncv1.Destination, net network.Network) ([]netip.Addr, error) {
	eps, err := r.Endpoints(namespace, to, net)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, ep := range eps {
		out = append(out, ep.Addrs...)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out), nil
}

// Endpoint is what one claim of selected pods has on the network: its
// addresses, and the container ports of the selected pods it serves (a
// named port in a NetworkPolicy egress rule is the destination pod's).
type Endpoint struct {
	Addrs []netip.Addr
	Ports []corev1.ContainerPort
}

// Endpoints returns the endpoints on net of the pods the destination
// selects, claim by claim, as Addresses does.
func (r Resolver) Endpoints(namespace string, to ncv1.Destination, net network.Network) ([]Endpoint, error) {
	ctx, cancel := r.Context()
	defer cancel()
	namespaces, err := r.namespaces(ctx, namespace, to.NamespaceSelector)
	if err != nil {
		return nil, err
	}
	podSel := labels.Everything()
	if to.PodSelector != nil {
		if podSel, err = metav1.LabelSelectorAsSelector(to.PodSelector); err != nil {
			return nil, fmt.Errorf("podSelector: %w", err)
		}
	}
	var out []Endpoint
	for _, ns := range namespaces {
		eps, err := r.inNamespace(ctx, ns, podSel, net.Ref)
		if err != nil {
			return nil, err
		}
		out = append(out, eps...)
	}
	return out, nil
}

func (r Resolver) namespaces(ctx context.Context, own string, sel *metav1.LabelSelector) ([]string, error) {
	if sel == nil {
		return []string{own}, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("namespaceSelector: %w", err)
	}
	list, err := r.API.Namespaces(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("list namespaces %s: %w", s, err)
	}
	out := make([]string, 0, len(list))
	for _, n := range list {
		out = append(out, n.Name)
	}
	return out, nil
}

func (r Resolver) inNamespace(ctx context.Context, ns string, podSel labels.Selector, ref attachment.NetworkRef) ([]Endpoint, error) {
	pods, err := r.API.Pods(ctx, ns, podSel)
	if err != nil {
		return nil, fmt.Errorf("list pods of namespace %s: %w", ns, err)
	}
	if len(pods) == 0 {
		return nil, nil
	}
	if ref.Kind == network.DefaultKind {
		return primaryEndpoints(pods), nil
	}
	if isNAD(ref) {
		return nadEndpoints(pods, ref), nil
	}
	selected := make(map[types.UID]*corev1.Pod, len(pods))
	for i := range pods {
		selected[pods[i].UID] = &pods[i]
	}
	claims, err := r.API.Claims(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims of namespace %s: %w", ns, err)
	}
	var out []Endpoint
	for _, c := range claims {
		var sel []*corev1.Pod
		reserved := 0
		for _, res := range c.Status.ReservedFor {
			if res.Resource != "pods" || res.APIGroup != "" {
				continue
			}
			reserved++
			if p := selected[res.UID]; p != nil {
				sel = append(sel, p)
			}
		}
		if len(sel) > 0 {
			out = append(out, endpointsOn(c, ref, sel, reserved)...)
		}
	}
	return out, nil
}

// endpointsOn returns the endpoints on the network of the selected pods of
// a claim (reserved: how many pods reserve it). A claim shared by several
// pods gives each its own interface, listed in the status data: each
// selected pod is its own addresses (the pods it does not select, none).
// Without that list (a claim of one pod, or written by an older netclass)
// the status's networkData stands for the claim's pods only when every one
// of them is selected: it may be any of theirs.
func endpointsOn(c resourceapi.ResourceClaim, ref attachment.NetworkRef, sel []*corev1.Pod, reserved int) []Endpoint {
	var out []Endpoint
	for _, d := range netclassEntries(c, ref) {
		if len(d.data.Pods) == 0 {
			if addrs := prefixAddrs(d.ips); len(sel) == reserved && len(addrs) > 0 {
				out = append(out, Endpoint{Addrs: addrs, Ports: podPorts(sel...)})
			}
			continue
		}
		for _, p := range sel {
			for _, pi := range d.data.Pods {
				if addrs := prefixAddrs(pi.IPs); pi.UID == string(p.UID) && len(addrs) > 0 {
					out = append(out, Endpoint{Addrs: addrs, Ports: podPorts(p)})
				}
			}
		}
	}
	return out
}

// primaryEndpoints are the pods' addresses on the default network: their
// primary IPs (status.podIPs), whatever primary CNI gave them; a pod
// without one yet (or on the host's network: its IPs are the node's, and
// it is no pod of the default network) has none.
func primaryEndpoints(pods []corev1.Pod) []Endpoint {
	var out []Endpoint
	for i := range pods {
		p := &pods[i]
		if p.Spec.HostNetwork {
			continue
		}
		var addrs []netip.Addr
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) > 0 {
			out = append(out, Endpoint{Addrs: addrs, Ports: podPorts(p)})
		}
	}
	return out
}

func podPorts(pods ...*corev1.Pod) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, p := range pods {
		for _, ct := range p.Spec.Containers {
			out = append(out, ct.Ports...)
		}
	}
	return out
}

func prefixAddrs(ips []string) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		if p, err := netip.ParsePrefix(ip); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out
}

// entry is a netclass.dev status entry of a claim on a network.
type entry struct {
	data contract.ClaimStatusData
	ips  []string
}

// netclassEntries returns the claim's netclass.dev status entries on the
// network.
func netclassEntries(c resourceapi.ResourceClaim, ref attachment.NetworkRef) []entry {
	var out []entry
	for _, d := range c.Status.Devices {
		if d.Driver != contract.DriverName || d.NetworkData == nil || d.Data == nil {
			continue
		}
		var data contract.ClaimStatusData
		if json.Unmarshal(d.Data.Raw, &data) != nil || data.PodNetwork != ref.Name ||
			data.PodNetworkNamespace != ref.Namespace || data.NetworkClass != ref.Class {
			continue
		}
		out = append(out, entry{data: data, ips: d.NetworkData.IPs})
	}
	return out
}

// AddressesOn returns the addresses a claim's netclass.dev status entries
// report on the network (every pod's, for a shared claim).
func AddressesOn(c resourceapi.ResourceClaim, ref attachment.NetworkRef) []netip.Addr {
	var out []netip.Addr
	for _, e := range netclassEntries(c, ref) {
		out = append(out, prefixAddrs(e.ips)...)
		for _, p := range e.data.Pods {
			out = append(out, prefixAddrs(p.IPs)...)
		}
	}
	return out
}
