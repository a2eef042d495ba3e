package nft

import (
	"encoding/binary"
	"math"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Expression builders, one per nft statement netclass uses. Register 1 is
// the only register needed.

// ifname pads an interface name to IFNAMSIZ, as the kernel compares it.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// matchIifname: `iifname "name"`.
func matchIifname(name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(name)},
	}
}

// matchProtocol: `meta protocol ip|ip6`, the frame's ethertype. Unlike
// `meta nfproto` it means the same in the netdev and bridge families.
func matchProtocol(v6 bool) []expr.Any {
	proto := uint16(unix.ETH_P_IP)
	if v6 {
		proto = unix.ETH_P_IPV6
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, proto)},
	}
}

// acceptNDP: `meta protocol ip6 meta l4proto ipv6-icmp icmpv6 type
// 133-137 accept`: router and neighbour discovery (and redirects) are
// neither marked nor metered, so a meter can never starve the neighbour
// cache.
func acceptNDP() []expr.Any {
	return concat(matchProtocol(true), matchL4proto(unix.IPPROTO_ICMPV6), []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: []byte{ndpFirst}, ToData: []byte{ndpLast}},
		verdict(expr.VerdictAccept),
	})
}

// ICMPv6 types of router solicitation ... redirect (RFC 4861).
const ndpFirst, ndpLast = 133, 137

// ICMPv6 types of MLD: query, report, done (RFC 2710), and MLDv2's report
// (RFC 3810).
const mldFirst, mldv2Report = 130, 143

// matchICMPv6Types: `icmpv6 type <from>-<to>` (the packet must be ICMPv6).
func matchICMPv6Types(from, to uint8) []expr.Any {
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: []byte{from}, ToData: []byte{to}},
	}
}

// dispatchByIifname: `iifname vmap @set`.
func dispatchByIifname(set string, setID uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Lookup{SourceRegister: 1, IsDestRegSet: true, DestRegister: 0, SetName: set, SetID: setID},
	}
}

// matchDaddrInSet: `ip daddr @set` or `ip6 daddr @set`.
func matchDaddrInSet(v6 bool, set string, setID uint32) []expr.Any {
	return matchAddrInSet(v6, false, set, setID)
}

// matchL4proto: `meta l4proto <proto>`.
func matchL4proto(proto uint8) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

// matchDport: `th dport <port>` (the destination port sits at offset 2 of
// TCP, UDP and SCTP headers alike).
func matchDport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
	}
}

// matchDportRange: `th dport <from>` when the range is one port, else
// `th dport <from>-<to>` (a range expression, as nft compiles it).
func matchDportRange(from, to uint16) []expr.Any {
	if from == to {
		return matchDport(from)
	}
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: binary.BigEndian.AppendUint16(nil, from),
			ToData: binary.BigEndian.AppendUint16(nil, to)},
	}
}

// setDSCP: `ip dscp set <d>` / `ip6 dscp set <d>`, rewriting the first two
// bytes of the IP header and keeping ECN (and the IPv4 checksum) right,
// exactly as nft compiles it.
func setDSCP(v6 bool, dscp uint8) []expr.Any {
	mask, xor := []byte{0xff, 0x03}, []byte{0x00, dscp << 2}
	csum, csumOff := expr.CsumTypeInet, uint32(10)
	if v6 {
		// Version(4) | traffic class(8) | flow label(20): DSCP straddles bytes 0 and 1.
		mask, xor = []byte{0xf0, 0x3f}, []byte{dscp >> 2, (dscp & 0x03) << 6}
		csum, csumOff = expr.CsumTypeNone, 0
	}
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 0, Len: 2},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 2, Mask: mask, Xor: xor},
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 0, Len: 2, CsumType: csum, CsumOffset: csumOff},
	}
}

// matchDSCPRange: `ip dscp <from>-<to>` / `ip6 dscp <from>-<to>` (one
// value: a range of one), on the first two bytes of the IP header as
// setDSCP rewrites them.
func matchDSCPRange(v6 bool, from, to uint8) []expr.Any {
	mask, at := []byte{0x00, 0xfc}, func(d uint8) []byte { return []byte{0x00, d << 2} }
	if v6 {
		mask, at = []byte{0x0f, 0xc0}, func(d uint8) []byte { return []byte{d >> 2, (d & 0x03) << 6} }
	}
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 0, Len: 2},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 2, Mask: mask, Xor: []byte{0x00, 0x00}},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: at(from), ToData: at(to)},
	}
}

// dropMislabelled: `ether type ip meta protocol != ip drop` (ip6 alike).
func dropMislabelled(v6 bool) []expr.Any {
	proto := uint16(unix.ETH_P_IP)
	if v6 {
		proto = unix.ETH_P_IPV6
	}
	return concat(matchEtherType(proto), []expr.Any{
		&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, proto)},
		verdict(expr.VerdictDrop),
	})
}

// dropOver: `limit rate over <rate> bytes/second burst <b> bytes drop`, a
// token bucket of the given size refilled at rate.
func dropOver(rateBytes, bucketBytes uint64) []expr.Any {
	return []expr.Any{
		&expr.Limit{Type: expr.LimitTypePktBytes, Rate: rateBytes, Over: true, Unit: expr.LimitTimeSecond, Burst: limitBurst(rateBytes, bucketBytes)},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}

// limitBurst converts a bucket size into nft's burst. In byte mode the
// kernel's bucket holds one unit (second) of rate plus the burst
// (nft_limit_init: tokens_max = unit * (rate + burst) / rate), so the burst
// handed over is the bucket minus one second of rate. A bucket smaller than
// one second of rate cannot be expressed: it becomes exactly one second.
func limitBurst(rateBytes, bucketBytes uint64) uint32 {
	if bucketBytes <= rateBytes {
		return 0
	}
	return uint32(min(bucketBytes-rateBytes, math.MaxUint32))
}

// matchEtherSaddrNot: `ether saddr != <mac>`.
func matchEtherSaddrNot(mac []byte) []expr.Any {
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: mac},
	}
}

func verdict(kind expr.VerdictKind) expr.Any { return &expr.Verdict{Kind: kind} }

func gotoChain(name string) expr.Any { return &expr.Verdict{Kind: expr.VerdictGoto, Chain: name} }

func concat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// matchAddrInSet: `ip saddr|daddr @set` or `ip6 saddr|daddr @set`.
func matchAddrInSet(v6, source bool, set string, setID uint32) []expr.Any {
	offset, length := uint32(16), uint32(4) // IPv4 daddr
	switch {
	case v6 && source:
		offset, length = 8, 16
	case v6:
		offset, length = 24, 16
	case source:
		offset = 12
	}
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: length},
		&expr.Lookup{SourceRegister: 1, SetName: set, SetID: setID},
	}
}

// matchIfname: `iifname|oifname "name"`.
func matchIfname(name string, input bool) []expr.Any {
	if input {
		return matchIifname(name)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(name)},
	}
}

// acceptEstablished: `ct state established,related accept`.
func acceptEstablished() []expr.Any {
	mask := binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
	return []expr.Any{
		&expr.Ct{Register: 1, SourceRegister: false, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
		verdict(expr.VerdictAccept),
	}
}

// matchNFProto: `meta nfproto ipv4|ipv6`, the family of an inet table's
// packet.
func matchNFProto(v6 bool) []expr.Any {
	proto := byte(unix.NFPROTO_IPV4)
	if v6 {
		proto = unix.NFPROTO_IPV6
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}
