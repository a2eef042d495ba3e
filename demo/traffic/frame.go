package traffic

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/sys/unix"
)

// auxVLAN returns the 802.1Q tag the kernel took out of a received frame,
// from its PACKET_AUXDATA control message; nil when there was none.
func auxVLAN(oob []byte) *VLANTag {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	// struct tpacket_auxdata: status (u32) at 0, vlan_tci (u16) at 16.
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < 20 {
			continue
		}
		if binary.NativeEndian.Uint32(m.Data[0:4])&unix.TP_STATUS_VLAN_VALID != 0 {
			return tag(binary.NativeEndian.Uint16(m.Data[16:18]))
		}
	}
	return nil
}

func tag(tci uint16) *VLANTag { return &VLANTag{ID: tci & 0x0fff, PCP: uint8(tci >> 13)} }

// parseFrame decodes Ethernet (with an 802.1Q tag left in the data, or the
// one auxdata reported) + IPv4/IPv6 + the destination port of TCP/UDP/SCTP,
// and the packet a VXLAN datagram carries.
func parseFrame(b []byte, vlan *VLANTag) (Packet, bool) {
	if len(b) < 14 {
		return Packet{}, false
	}
	et, ip := binary.BigEndian.Uint16(b[12:14]), b[14:]
	if et == unix.ETH_P_8021Q && len(ip) >= 4 {
		vlan = tag(binary.BigEndian.Uint16(ip[0:2]))
		et, ip = binary.BigEndian.Uint16(ip[2:4]), ip[4:]
	}
	p, l4, ok := parseIP(et, ip)
	if !ok {
		return Packet{}, false
	}
	p.VLAN = vlan
	return withInner(withPort(p, l4), l4), true
}

// parseIP decodes an IPv4 or IPv6 header and returns what follows it.
func parseIP(ethertype uint16, ip []byte) (Packet, []byte, bool) {
	switch ethertype {
	case unix.ETH_P_IP:
		if len(ip) < 20 {
			return Packet{}, nil, false
		}
		ihl := int(ip[0]&0x0f) * 4
		p := Packet{DSCP: ip[1] >> 2, ECN: ip[1] & 3, Proto: ip[9],
			Src: netip.AddrFrom4([4]byte(ip[12:16])), Dst: netip.AddrFrom4([4]byte(ip[16:20]))}
		return p, ip[min(ihl, len(ip)):], true
	case unix.ETH_P_IPV6:
		if len(ip) < 40 {
			return Packet{}, nil, false
		}
		tc := (ip[0]&0x0f)<<4 | ip[1]>>4
		p := Packet{DSCP: tc >> 2, ECN: tc & 3, Proto: ip[6],
			Src: netip.AddrFrom16([16]byte(ip[8:24])), Dst: netip.AddrFrom16([16]byte(ip[24:40]))}
		return p, ip[40:], true
	}
	return Packet{}, nil, false
}

func withPort(p Packet, l4 []byte) Packet {
	if (p.Proto == 6 || p.Proto == 17 || p.Proto == 132) && len(l4) >= 4 {
		p.DstPort = binary.BigEndian.Uint16(l4[2:4])
	}
	return p
}

// withInner decodes the frame a VXLAN datagram carries (RFC 7348: UDP,
// then 8 bytes whose first has the I flag, then the inner Ethernet frame),
// whatever its UDP port.
func withInner(p Packet, l4 []byte) Packet {
	const udp, vxlanHeader = 8, 8
	if p.Proto != 17 || len(l4) < udp+vxlanHeader+14 || l4[udp]&0x08 == 0 {
		return p
	}
	inner, ok := parseFrame(l4[udp+vxlanHeader:], nil)
	if !ok || inner.Inner != nil {
		return p
	}
	p.Inner, p.VNI = &inner, binary.BigEndian.Uint32(l4[udp+4:udp+8])>>8
	return p
}
