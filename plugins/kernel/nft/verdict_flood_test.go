package nft

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/test/rawframe"
)

// The ClusterNetworkPolicy tiers hold for the frames a bridge floods
// (broadcast and multicast IP), which the inet table's hooks never see
// with the port they go to: an Admin Deny drops a peer's broadcast and
// multicast to a port no namespaced policy isolates, and to one isolated
// by a policy that allows every peer; a Baseline Deny drops them where no
// namespaced policy isolates the port; other peers' still arrive.
func TestClusterTiersGovernFloodedFrames(t *testing.T) {
	b := newSwitchBed(t, "a", "b", "c")
	a, bb, c := b.pods["a"], b.pods["b"], b.pods["c"]
	b.guard(t, false, "a", "b", "c")
	fromA := netpol.Allow{V4: hostRanges(a.ip), V6: []qos.Range{}}
	fromC := netpol.Allow{V4: hostRanges(c.ip), V6: []qos.Range{}}
	adminDenyA := []netpol.Verdict{{Action: netpol.Deny, Match: fromA}}
	for _, step := range []struct {
		what   string
		dir    netpol.Direction
		arrive map[string]bool // sender: its broadcast and multicast reach b
	}{
		{"admin deny, not isolated", netpol.Direction{Admin: adminDenyA}, map[string]bool{"a": false, "c": true}},
		{"admin deny over an allow of every peer", netpol.Direction{Isolated: true, Allow: []netpol.Allow{{}}, Admin: adminDenyA}, map[string]bool{"a": false, "c": true}},
		{"baseline deny, not isolated", netpol.Direction{Baseline: []netpol.Verdict{{Action: netpol.Deny, Match: fromC}}}, map[string]bool{"a": true, "c": false}},
		{"admin pass to a baseline deny", netpol.Direction{Admin: []netpol.Verdict{{Action: netpol.Pass, Match: fromC}, {Action: netpol.Deny, Match: fromC}},
			Baseline: []netpol.Verdict{{Action: netpol.Deny, Match: fromC}}}, map[string]bool{"a": true, "c": false}},
		{"admin accept over a baseline deny", netpol.Direction{Admin: []netpol.Verdict{{Action: netpol.Accept, Match: fromC}},
			Baseline: []netpol.Verdict{{Action: netpol.Deny}}}, map[string]bool{"a": false, "c": true}},
	} {
		b.policy(t, map[string]*netpol.Plan{"b": {Ingress: step.dir}})
		for from, want := range step.arrive {
			sender := b.pods[from]
			if got := floodArrives(t, sender, bb, netip.MustParseAddr("10.7.0.255"), rawframe.Broadcast()); got != want {
				t.Errorf("%s: %s's broadcast reaches b: %v, want %v", step.what, from, got, want)
			}
			group := net.HardwareAddr{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03}
			if got := floodArrives(t, sender, bb, netip.MustParseAddr("239.1.2.3"), group); got != want {
				t.Errorf("%s: %s's multicast reaches b: %v, want %v", step.what, from, got, want)
			}
		}
	}
	b.policy(t, map[string]*netpol.Plan{"b": {Ingress: netpol.Direction{Baseline: []netpol.Verdict{{Action: netpol.Deny, Match: fromC}}}}})
	b.nft(t, noAdminChain)
}

// floodArrives sends a UDP datagram from a pod to a broadcast or multicast
// address (as a frame to dstMAC) and reports whether the other pod's
// interface received it.
func floodArrives(t *testing.T, from, to *swPod, dst netip.Addr, dstMAC net.HardwareAddr) bool {
	t.Helper()
	marker := fmt.Sprintf("netclass-flood-%08d", time.Now().UnixNano()%1e8) // its last 8 bytes are what is waited for
	payload, typ := rawframe.UDP(netip.AddrPortFrom(from.ip, 5555), netip.AddrPortFrom(dst, 9999), []byte(marker))
	return frameArrives(t, from, to, rawframe.Frame{Src: from.mac, Dst: dstMAC, Type: typ, Payload: payload})
}

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
