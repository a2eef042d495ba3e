package nft

import (
	"bytes"
	"encoding/binary"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Expression builders of the switch-port tables (guard.go, hostpolicy.go).

// matchEtherType: `ether type <t>`, read from the frame (a VLAN tag the
// kernel took out of the frame reads as one: `ether type 8021q`).
func matchEtherType(t uint16) []expr.Any {
	return matchPayload(expr.PayloadBaseLLHeader, 12, binary.BigEndian.AppendUint16(nil, t))
}

// matchPayload: the payload at base+offset equals data.
func matchPayload(base expr.PayloadBase, offset uint32, data []byte) []expr.Any {
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: base, Offset: offset, Len: uint32(len(data))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data},
	}
}

// matchArpShaNot: `arp saddr ether != <mac>` (the sender hardware address
// of an Ethernet/IPv4 ARP packet).
func matchArpShaNot(mac []byte) []expr.Any {
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 6},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: mac},
	}
}

// matchArpSpaInSet: `arp saddr ip @set`.
func matchArpSpaInSet(set string, setID uint32) []expr.Any {
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 14, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set, SetID: setID},
	}
}

// matchSport: `th sport <port>`.
func matchSport(port uint16) []expr.Any {
	return matchPayload(expr.PayloadBaseTransportHeader, 0, binary.BigEndian.AppendUint16(nil, port))
}

// matchICMPType: `icmp type <t>` / `icmpv6 type <t>` (after meta l4proto).
func matchICMPType(t uint8) []expr.Any {
	return matchPayload(expr.PayloadBaseTransportHeader, 0, []byte{t})
}

// ifnameInSet: `iifname @set` / `oifname @set`.
func ifnameInSet(input bool, set string, setID uint32) []expr.Any {
	key := expr.MetaKeyOIFNAME
	if input {
		key = expr.MetaKeyIIFNAME
	}
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: set, SetID: setID},
	}
}

// matchEtherIif: `meta iiftype ether`, which nft puts before an Ethernet
// header match in an inet table (a packet from a tunnel has none).
func matchEtherIif() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFTYPE, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint16(nil, unix.ARPHRD_ETHER)},
	}
}

// dispatchByIfnameMAC: `iifname . ether saddr vmap @set` (source) or
// `oifname . ether daddr vmap @set`.
func dispatchByIfnameMAC(source bool, set string, setID uint32) []expr.Any {
	key, offset := expr.MetaKeyOIFNAME, uint32(0)
	if source {
		key, offset = expr.MetaKeyIIFNAME, 6
	}
	return concat(matchEtherIif(), []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 2, Base: expr.PayloadBaseLLHeader, Offset: offset, Len: 6},
		&expr.Lookup{SourceRegister: 1, IsDestRegSet: true, DestRegister: 0, SetName: set, SetID: setID},
	})
}

// dispatchByOifnameAddr: `meta nfproto F oifname . ip[6] daddr vmap @set`.
func dispatchByOifnameAddr(v6 bool, set string, setID uint32) []expr.Any {
	offset, length := uint32(16), uint32(4)
	if v6 {
		offset, length = 24, 16
	}
	return concat(matchNFProto(v6), []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 2, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: length},
		&expr.Lookup{SourceRegister: 1, IsDestRegSet: true, DestRegister: 0, SetName: set, SetID: setID},
	})
}

// dispatchByOifname: `oifname vmap @set`.
func dispatchByOifname(set string, setID uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Lookup{SourceRegister: 1, IsDestRegSet: true, DestRegister: 0, SetName: set, SetID: setID},
	}
}

// matchUnicast: `ether daddr & 01:00:00:00:00:00 == 00:00:00:00:00:00`.
func matchUnicast() []expr.Any {
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 0, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{1}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0}},
	}
}

// ifnameKey pads an interface name to a concatenation's first field.
func ifnameKey(name string, rest ...[]byte) []byte {
	k := ifname(name)
	for _, r := range rest {
		k = append(k, r...)
		for len(k)%4 != 0 {
			k = append(k, 0)
		}
	}
	return k
}

// trimIfname reads an interface name back from a set key.
func trimIfname(key []byte) string {
	if len(key) > unix.IFNAMSIZ {
		key = key[:unix.IFNAMSIZ]
	}
	return string(bytes.TrimRight(key, "\x00"))
}
