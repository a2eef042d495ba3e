package nft

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/rawframe"
	"github.com/netclass-dev/netclass/test/traffic"
)

// In a pod's own table (no host end), a frame a packet socket sends with
// EF is re-marked by the admin's policy, and one whose socket gives it
// another protocol than its ethertype (sll_protocol, which only needs
// CAP_NET_RAW) matches no rule keyed on the protocol: it is dropped, not
// let past the re-marking.
func TestPodTableRemarksFramesOfPacketSockets(t *testing.T) {
	pod, peer := nstest.New(t), nstest.New(t)
	nstest.Veth(t, pod, "net1", "10.61.0.1/24", peer, "p1", "10.61.0.2/24")
	plan := qos.Compile(&qos.Spec{Policy: &qos.DSCPPolicy{Allowed: []qos.DSCPRange{{First: 0, Last: 40}}}})
	if err := InNamespace(pod.Path, func(c *nftables.Conn) error { return ApplyPodQoS(c, "net1", plan) }); err != nil {
		t.Fatal(err)
	}
	src, dst := pod.Link(t, "net1").Attrs().HardwareAddr, peer.Link(t, "p1").Attrs().HardwareAddr
	for _, tc := range []struct {
		what      string
		port      uint16
		sockProto uint16
		arrive    bool
		wantDSCP  uint8
	}{
		{"labelled IPv4", 7301, 0, true, 0},
		{"labelled as an experimental ethertype", 7302, rawframe.EtherExperimental, false, 0},
	} {
		s, err := traffic.Sniff(peer, "p1")
		if err != nil {
			t.Fatal(err)
		}
		payload, typ := rawframe.UDP(netip.MustParseAddrPort("10.61.0.1:5555"), netip.AddrPortFrom(netip.MustParseAddr("10.61.0.2"), tc.port), []byte("netclass-spoof"))
		withTOS(payload, 46<<2)
		f := rawframe.Frame{Src: src, Dst: dst, Type: typ, Payload: payload, SockProtocol: tc.sockProto}
		var sent error
		pod.Do(t, func() error { sent = rawframe.Send("net1", f); return nil })
		if sent != nil && tc.arrive { // a frame the egress hook drops is the sender's ENOBUFS
			t.Fatalf("%s: %v", tc.what, sent)
		}
		got := s.WaitFor(func(p traffic.Packet) bool { return p.DstPort == tc.port }, 1, 500*time.Millisecond)
		s.Close()
		switch {
		case len(got) > 0 != tc.arrive:
			t.Errorf("%s: arrived %v, want %v (%+v)", tc.what, len(got) > 0, tc.arrive, got)
		case tc.arrive && got[0].DSCP != tc.wantDSCP:
			t.Errorf("%s: the peer sees DSCP %d, want %d", tc.what, got[0].DSCP, tc.wantDSCP)
		}
	}
}

// withTOS sets an IPv4 packet's TOS byte and its header checksum.
func withTOS(ip []byte, tos uint8) {
	ip[1] = tos
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], rawframe.Checksum(ip[:20]))
}
