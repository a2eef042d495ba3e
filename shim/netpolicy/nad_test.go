package netpolicy

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/network"
)

// A labelled NetworkPolicy scoped to namespace/name applies to the
// attachments Multus made from the NetworkAttachmentDefinition of that
// name (and to a Network of that name), not to another NAD's; unscoped,
// it applies to every netclass attachment of the pod, NADs' too.
func TestScopeNamesNADs(t *testing.T) {
	nad := func(ns, name string) network.Network {
		return network.FromNAD(types.NamespacedName{Namespace: ns, Name: name})
	}
	generated := func(ns, name, backingNS, backing string) network.Network {
		n := nad(ns, name)
		ref := network.BackingRef(backingNS, backing)
		n.Backing = &ref
		return n
	}
	for _, tc := range []struct {
		annotation string // "-": none
		net        network.Network
		want       bool
	}{
		{"t1/nad", nad("t1", "nad"), true},
		{"blue, t1/nad", nad("t1", "nad"), true},
		{"t1/nad", nad("t1", "other"), false},
		{"t1/nad", nad("t2", "nad"), false},
		{"nad", nad("t1", "nad"), false}, // a bare name is a PodNetwork's
		{"-", nad("t1", "nad"), true},
		// A NAD netclass-controller generated is on its network: another
		// namespace's NAD of PodNetwork storage is storage too.
		{"storage", generated("t2", "storage", "", "storage"), true},
		{"storage", generated("t2", "storage", "t2", "storage"), false},
		{"t2/vx", generated("t2", "vx", "t2", "vx"), true},
		{"other", generated("t2", "storage", "", "storage"), false},
	} {
		p := policy("scoped", func(p *networkingv1.NetworkPolicy) {
			if tc.annotation != "-" {
				p.Annotations = map[string]string{contract.AnnotationPolicyNetworks: tc.annotation}
			}
		})
		_, selected, _ := Compile([]*networkingv1.NetworkPolicy{p}, Target{Namespace: "t1", Labels: map[string]string{"app": "server"}, Network: tc.net}, peersByLabel{})
		if got := len(selected) == 1; got != tc.want {
			t.Errorf("scoped %q on %s: selected %v, want %v", tc.annotation, tc.net.Ref, got, tc.want)
		}
	}
}
