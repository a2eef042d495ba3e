package peers

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/multus"
	"github.com/netclass-dev/netclass/shim/network"
)

// MaxNADAddressesPerPod bounds the addresses a pod's network-status gives
// it on one NAD's network (as a claim's networkData holds 16 at most):
// whoever may update the pod can write that annotation, and would
// otherwise fill the policies that select the pod with addresses, past
// their bounds, and have their rules left out.
const MaxNADAddressesPerPod = 16

// nadEndpoints are the pods' addresses on a NetworkAttachmentDefinition's
// network: the IPs of their network-status entries naming that NAD
// (Multus writes them; "namespace/name", a bare name of the pod's
// namespace), the first MaxNADAddressesPerPod of each pod. A pod whose
// status is unreadable, or names the NAD on no interface, has none; so has
// a pod whose sandbox no kubelet runs (no status.podIPs, which only the
// kubelet writes, or a pod that has ended): its users could write the
// annotation on pods by the hundred that never run, and fill the rules
// selecting them past their budget.
func nadEndpoints(pods []corev1.Pod, ref attachment.NetworkRef) []Endpoint {
	var out []Endpoint
	for i := range pods {
		p := &pods[i]
		if !sandboxRuns(p) {
			continue
		}
		entries, err := multus.ParseStatus(p.Annotations[multus.AnnotationNetworkStatus])
		if err != nil {
			continue
		}
		var addrs []netip.Addr
		for _, e := range entries {
			nad, err := multus.ParseNADName(e.Name, p.Namespace)
			if err != nil || e.Default || nad.Namespace != ref.Namespace || nad.Name != ref.Name {
				continue
			}
			for _, ip := range e.IPs {
				if a, err := netip.ParseAddr(ip); err == nil && len(addrs) < MaxNADAddressesPerPod && !slices.Contains(addrs, a) {
					addrs = append(addrs, a)
				}
			}
		}
		if len(addrs) > 0 {
			out = append(out, Endpoint{Addrs: addrs, Ports: podPorts(p)})
		}
	}
	return out
}

// sandboxRuns: a kubelet has made the pod's sandbox (its status has the
// primary network's addresses) and the pod has not ended.
func sandboxRuns(p *corev1.Pod) bool {
	return len(p.Status.PodIPs) > 0 && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// isNAD reports whether the reference names a NetworkAttachmentDefinition.
func isNAD(ref attachment.NetworkRef) bool { return network.Network{Ref: ref}.IsNAD() }
