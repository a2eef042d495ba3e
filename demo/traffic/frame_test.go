package traffic

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func eth(ethertype uint16, payload []byte) []byte {
	b := make([]byte, 12, 14+len(payload))
	return append(binary.BigEndian.AppendUint16(b, ethertype), payload...)
}

func v4pkt(tos, proto byte, src, dst string, payload []byte) []byte {
	h := make([]byte, 20)
	h[0], h[1], h[9] = 0x45, tos, proto
	copy(h[12:16], netip.MustParseAddr(src).AsSlice())
	copy(h[16:20], netip.MustParseAddr(dst).AsSlice())
	return append(h, payload...)
}

func v6pkt(tclass, next byte, src, dst string, payload []byte) []byte {
	h := make([]byte, 40)
	h[0], h[1], h[6] = 0x60|tclass>>4, tclass<<4, next
	copy(h[8:24], netip.MustParseAddr(src).AsSlice())
	copy(h[24:40], netip.MustParseAddr(dst).AsSlice())
	return append(h, payload...)
}

func udp(dport uint16, payload []byte) []byte {
	h := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 40000), dport)
	return append(append(h, 0, 0, 0, 0), payload...)
}

func vxlan(vni uint32, frame []byte) []byte {
	h := []byte{0x08, 0, 0, 0}
	return append(binary.BigEndian.AppendUint32(h, vni<<8), frame...)
}

func TestParseFrame(t *testing.T) {
	inner := eth(unix.ETH_P_IP, v4pkt(46<<2|2, 17, "10.0.0.1", "10.0.0.2", udp(80, nil)))
	tagged := append(binary.BigEndian.AppendUint16(nil, 5<<13|100), binary.BigEndian.AppendUint16(nil, unix.ETH_P_IP)...)
	tests := []struct {
		name  string
		frame []byte
		aux   *VLANTag
		want  Packet
		inner *Packet
	}{
		{"ipv4 dscp and ecn", inner, nil, Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 17, DstPort: 80, DSCP: 46, ECN: 2}, nil},
		{"ipv6 traffic class", eth(unix.ETH_P_IPV6, v6pkt(26<<2|1, 6, "fd00::1", "fd00::2", udp(443, nil))),
			nil, Packet{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), Proto: 6, DstPort: 443, DSCP: 26, ECN: 1}, nil},
		{"tag in the data", eth(unix.ETH_P_8021Q, append(tagged, v4pkt(0, 1, "10.0.0.1", "10.0.0.2", nil)...)), nil,
			Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 1, VLAN: &VLANTag{ID: 100, PCP: 5}}, nil},
		{"tag from auxdata", eth(unix.ETH_P_IP, v4pkt(0, 1, "10.0.0.1", "10.0.0.2", nil)), &VLANTag{ID: 7, PCP: 3},
			Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 1, VLAN: &VLANTag{ID: 7, PCP: 3}}, nil},
		{"vxlan over ipv6", eth(unix.ETH_P_IPV6, v6pkt(46<<2|2, 17, "fd50::1", "fd50::2", udp(4789, vxlan(100, inner)))), nil,
			Packet{Src: netip.MustParseAddr("fd50::1"), Dst: netip.MustParseAddr("fd50::2"), Proto: 17, DstPort: 4789, DSCP: 46, ECN: 2, VNI: 100},
			&Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 17, DstPort: 80, DSCP: 46, ECN: 2}},
		{"udp that is not vxlan", eth(unix.ETH_P_IP, v4pkt(0, 17, "10.0.0.1", "10.0.0.2", udp(53, make([]byte, 40)))), nil,
			Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 17, DstPort: 53}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseFrame(tc.frame, tc.aux)
			if !ok {
				t.Fatal("not parsed")
			}
			gotInner := got.Inner
			got.Inner = nil
			if (got.VLAN == nil) != (tc.want.VLAN == nil) || got.VLAN != nil && *got.VLAN != *tc.want.VLAN {
				t.Errorf("vlan %+v, want %+v", got.VLAN, tc.want.VLAN)
			}
			got.VLAN, tc.want.VLAN = nil, nil
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if (gotInner == nil) != (tc.inner == nil) || gotInner != nil && *gotInner != *tc.inner {
				t.Errorf("inner %+v, want %+v", gotInner, tc.inner)
			}
		})
	}
}

func TestAuxVLAN(t *testing.T) {
	aux := unix.TpacketAuxdata{Status: unix.TP_STATUS_VLAN_VALID, Vlan_tci: 6<<13 | 200}
	data := unsafe.Slice((*byte)(unsafe.Pointer(&aux)), unsafe.Sizeof(aux))
	oob := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_PACKET, unix.PACKET_AUXDATA
	h.SetLen(unix.CmsgLen(len(data)))
	copy(oob[unix.CmsgLen(0):], data)
	if got := auxVLAN(oob); got == nil || *got != (VLANTag{ID: 200, PCP: 6}) {
		t.Errorf("auxVLAN = %+v, want id 200 pcp 6", got)
	}
	aux.Status = 0
	copy(oob[unix.CmsgLen(0):], data)
	if got := auxVLAN(oob); got != nil {
		t.Errorf("auxVLAN without TP_STATUS_VLAN_VALID = %+v, want nil", got)
	}
}
