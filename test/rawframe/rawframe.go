// Package rawframe builds Ethernet frames by hand and sends them through an
// AF_PACKET socket, as a process with only CAP_NET_RAW (the default
// capability set of a container) can: the frames never pass the sender's
// IP stack or its netfilter hooks, and carry whatever source MAC and
// address they are given. Tests use it to try to escape a NetworkPolicy
// and to spoof a neighbour; test/testbed/netprobe runs it inside pods.
package rawframe

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Ethertypes the frames carry.
const (
	EtherIPv4 = 0x0800
	EtherIPv6 = 0x86dd
	EtherARP  = 0x0806
	// EtherExperimental is the IEEE's local experimental ethertype: a
	// frame that is neither IP nor ARP.
	EtherExperimental = 0x88b5
)

// Frame is one Ethernet frame to build.
type Frame struct {
	Src, Dst net.HardwareAddr
	Type     uint16
	Payload  []byte
	// SockProtocol, when set, is the protocol the packet socket gives the
	// frame (sll_protocol, which becomes its skb protocol) instead of Type:
	// what a pod with CAP_NET_RAW can do.
	SockProtocol uint16
}

// Bytes is the frame as it goes on the wire.
func (f Frame) Bytes() []byte {
	b := make([]byte, 0, 14+len(f.Payload))
	b = append(b, f.Dst...)
	b = append(b, f.Src...)
	b = binary.BigEndian.AppendUint16(b, f.Type)
	return append(b, f.Payload...)
}

// UDP returns the payload of an IPv4 or IPv6 UDP datagram, checksums
// computed, and its ethertype.
func UDP(src, dst netip.AddrPort, payload []byte) ([]byte, uint16) {
	udp := binary.BigEndian.AppendUint16(nil, src.Port())
	udp = binary.BigEndian.AppendUint16(udp, dst.Port())
	udp = binary.BigEndian.AppendUint16(udp, uint16(8+len(payload)))
	udp = append(append(udp, 0, 0), payload...)
	s, d := src.Addr(), dst.Addr()
	pseudo := append(append(s.AsSlice(), d.AsSlice()...), 0, unix.IPPROTO_UDP)
	pseudo = binary.BigEndian.AppendUint16(pseudo, uint16(len(udp)))
	sum := Checksum(append(pseudo, udp...))
	if sum == 0 {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], sum)
	if s.Is4() {
		return ipv4(s, d, unix.IPPROTO_UDP, udp), EtherIPv4
	}
	return ipv6(s, d, unix.IPPROTO_UDP, udp), EtherIPv6
}

func ipv4(src, dst netip.Addr, proto uint8, body []byte) []byte {
	h := []byte{0x45, 0}
	h = binary.BigEndian.AppendUint16(h, uint16(20+len(body)))
	h = append(h, 0, 1, 0x40, 0, 64, proto, 0, 0)
	h = append(append(h, src.AsSlice()...), dst.AsSlice()...)
	binary.BigEndian.PutUint16(h[10:], Checksum(h))
	return append(h, body...)
}

func ipv6(src, dst netip.Addr, proto uint8, body []byte) []byte {
	h := []byte{0x60, 0, 0, 0}
	h = binary.BigEndian.AppendUint16(h, uint16(len(body)))
	h = append(h, proto, 64)
	h = append(append(h, src.AsSlice()...), dst.AsSlice()...)
	return append(h, body...)
}

// ICMPv6 returns the payload of an ICMPv6 message (type, code, body after
// the checksum), checksum computed.
func ICMPv6(src, dst netip.Addr, typ, code uint8, body []byte) []byte {
	msg := append([]byte{typ, code, 0, 0}, body...)
	pseudo := append(append(src.AsSlice(), dst.AsSlice()...), 0, 0, 0, 0, 0, 0, 0, unix.IPPROTO_ICMPV6)
	binary.BigEndian.PutUint32(pseudo[32:], uint32(len(msg)))
	binary.BigEndian.PutUint16(msg[2:], Checksum(append(pseudo, msg...)))
	h := ipv6(src, dst, unix.IPPROTO_ICMPV6, msg)
	h[7] = 255 // NDP's hop limit
	return h
}

// RouterAdvertisement is an ICMPv6 router advertisement (type 134) from src
// to all nodes, announcing a default route of 30 minutes.
func RouterAdvertisement(src netip.Addr) []byte {
	body := []byte{64, 0, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0} // hop limit, flags, lifetime 1800 s, reachable, retrans
	return ICMPv6(src, netip.MustParseAddr("ff02::1"), 134, 0, body)
}

// NeighborAdvertisement is an unsolicited ICMPv6 neighbour advertisement
// (type 136, override flag) from src to all nodes: target is at mac.
func NeighborAdvertisement(src, target netip.Addr, mac net.HardwareAddr) []byte {
	body := append([]byte{0x20, 0, 0, 0}, target.AsSlice()...)
	body = append(append(body, 2, 1), mac...) // option: target link-layer address
	return ICMPv6(src, netip.MustParseAddr("ff02::1"), 136, 0, body)
}

// NeighborSolicitation is an ICMPv6 neighbour solicitation (type 135) from
// src for target, sent to all nodes; from :: it is a duplicate address probe.
func NeighborSolicitation(src, target netip.Addr) []byte {
	return ICMPv6(src, netip.MustParseAddr("ff02::1"), 135, 0, append([]byte{0, 0, 0, 0}, target.AsSlice()...))
}

// Checksum is the Internet checksum (RFC 1071) of b.
func Checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = (sum >> 16) + (sum & 0xffff)
	}
	return ^uint16(sum)
}

// Send writes the frame to the interface through an AF_PACKET socket of
// the calling thread's network namespace.
func Send(ifname string, f Frame) error {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	defer unix.Close(fd)
	proto := f.Type
	if f.SockProtocol != 0 {
		proto = f.SockProtocol
	}
	to := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6, Protocol: htons(proto)}
	copy(to.Addr[:], f.Dst)
	if err := unix.Sendto(fd, f.Bytes(), 0, to); err != nil {
		return fmt.Errorf("send a frame on %s: %w", ifname, err)
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Broadcast returns the Ethernet broadcast address.
func Broadcast() net.HardwareAddr { return net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} }
