package nft

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/test/rawframe"
)

// An ingress-isolated port receives the ICMPv6 of neighbour discovery in
// multicast frames, not any ICMPv6 sent to the pod's own address in a
// multicast frame (an echo request here), which would bypass its policy.
func TestIsolatedPortTakesOnlyNDPAndMLDInMulticastFrames(t *testing.T) {
	b := newSwitchBed(t, "a", "b")
	a, bb := b.pods["a"], b.pods["b"]
	b.guard(t, false, "a", "b")
	b.policy(t, map[string]*netpol.Plan{"b": {Ingress: netpol.Direction{Isolated: true}}})
	allNodes := net.HardwareAddr{0x33, 0x33, 0x00, 0x00, 0x00, 0x01}
	echo := rawframe.ICMPv6(a.ll, bb.ll, 128, 0, []byte(fmt.Sprintf("netclass-echo-%08d", time.Now().UnixNano()%1e8)))
	if frameArrives(t, a, bb, rawframe.Frame{Src: a.mac, Dst: allNodes, Type: rawframe.EtherIPv6, Payload: echo}) {
		t.Error("an ICMPv6 echo to b's address in a multicast frame reached its isolated port")
	}
	ns := rawframe.NeighborSolicitation(a.ll, bb.ll)
	if !frameArrives(t, a, bb, rawframe.Frame{Src: a.mac, Dst: net.HardwareAddr{0x33, 0x33, 0xff, bb.ll.As16()[13], bb.ll.As16()[14], bb.ll.As16()[15]}, Type: rawframe.EtherIPv6, Payload: ns}) {
		t.Error("a neighbour solicitation for b did not reach its isolated port")
	}
}
