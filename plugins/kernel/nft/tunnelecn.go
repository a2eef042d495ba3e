package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// A VXLAN device's outer header takes the inner DSCP (tos inherit) and ECN
// field, except CE: Linux writes an inner CE as ECT(0) outside
// (ip_tunnel_ecn_encap, RFC 3168's full-functionality ingress), where RFC
// 6040's normal mode copies it, so that the fabric sees the congestion
// already met (netclass's own queue under a pod's shaper marks CE just
// before the tunnel). This host-wide table writes CE into the outer header
// of the VXLAN datagrams the host sends that carry a CE packet, on the
// VXLAN ports netclass uses (any sender's on those ports, which is as RFC
// 6040 wants too):
//
//	table inet netclass_tunnel_ecn {
//	  set ports { type inet_service; elements = { 4789, ... } }
//	  chain output {
//	    type filter hook output priority mangle; policy accept;
//	    udp dport @ports @th,224,16 0x800 @th,248,8 & 0x3 == 0x3 ip ecn set ce
//	    udp dport @ports @th,224,16 0x86dd @th,248,8 & 0x30 == 0x30 ip ecn set ce
//	    udp dport @ports @th,224,16 0x800 @th,248,8 & 0x3 == 0x3 ip6 ecn set ce
//	    udp dport @ports @th,224,16 0x86dd @th,248,8 & 0x30 == 0x30 ip6 ecn set ce
//	  }
//	}
//
// The inner frame starts 16 bytes into the UDP datagram (UDP header, VXLAN
// header): its ethertype at byte 28, the IPv4 TOS and the second byte of
// the IPv6 header (with the ECN bits of the traffic class) at byte 31. The
// datagrams leave through the output hook (udp_tunnel_xmit_skb ends in
// ip_local_out, ip6_local_out), before GSO copies the outer header to each
// segment. The table is created with the first VXLAN device and kept, like
// the shared bridge table; a port is added when a device uses it.
const TunnelECNTable = "netclass_tunnel_ecn"

const (
	tunnelECNChain = "output"
	tunnelECNSet   = "ports"
	// Offsets in the UDP datagram of the inner frame's ethertype and of
	// the byte holding the inner packet's ECN bits.
	innerEthertype, innerECNByte = 28, 31
)

func tunnelECNTable() *nftables.Table {
	return &nftables.Table{Name: TunnelECNTable, Family: nftables.TableFamilyINet}
}

func tunnelECNRuleset(ports []uint16) *ruleset {
	t := tunnelECNTable()
	base := &nftables.Chain{
		Name: tunnelECNChain, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityMangle, Policy: policyAccept(),
	}
	rs := &ruleset{table: t, chains: []*nftables.Chain{base}, rules: map[string][][]expr.Any{}}
	set := &nftables.Set{Table: t, Name: tunnelECNSet, ID: rs.setID(), KeyType: nftables.TypeInetService}
	rs.sets = append(rs.sets, setWithElements{set: set, elements: portElements(ports)})
	for _, outer6 := range []bool{false, true} {
		for _, inner6 := range []bool{false, true} {
			rs.rules[tunnelECNChain] = append(rs.rules[tunnelECNChain], concat(
				matchNFProto(outer6), matchL4proto(unix.IPPROTO_UDP),
				matchDportInSet(tunnelECNSet, set.ID), matchInnerCE(inner6), setECNCE(outer6)))
		}
	}
	return rs
}

func portElements(ports []uint16) []nftables.SetElement {
	els := make([]nftables.SetElement, 0, len(ports))
	for _, p := range ports {
		els = append(els, nftables.SetElement{Key: binary.BigEndian.AppendUint16(nil, p)})
	}
	return els
}

// matchDportInSet: `th dport @set`.
func matchDportInSet(set string, setID uint32) []expr.Any {
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: set, SetID: setID},
	}
}

// matchInnerCE: the VXLAN datagram carries an IPv4 (IPv6) packet whose ECN
// field is CE.
func matchInnerCE(v6 bool) []expr.Any {
	et, mask := uint16(unix.ETH_P_IP), byte(0x03)
	if v6 {
		et, mask = unix.ETH_P_IPV6, 0x30
	}
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: innerEthertype, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, et)},
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: innerECNByte, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{mask}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{mask}},
	}
}

// setECNCE: `ip ecn set ce` / `ip6 ecn set ce`, as nft compiles them
// (keeping the IPv4 checksum right).
func setECNCE(v6 bool) []expr.Any {
	mask, xor := []byte{0xff, 0xfc}, []byte{0x00, 0x03}
	csum, csumOff := expr.CsumTypeInet, uint32(10)
	if v6 {
		mask, xor = []byte{0xff, 0xcf}, []byte{0x00, 0x30}
		csum, csumOff = expr.CsumTypeNone, 0
	}
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 0, Len: 2},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 2, Mask: mask, Xor: xor},
		&expr.Payload{OperationType: expr.PayloadWrite, SourceRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 0, Len: 2, CsumType: csum, CsumOffset: csumOff},
	}
}

// EnsureTunnelECN makes CE reach the outer header of the VXLAN datagrams
// this namespace sends to UDP port: it creates the table (in one
// transaction, with the port) or adds the port to it. Add-only, so two
// devices set up at once never undo each other.
func EnsureTunnelECN(c *nftables.Conn, port uint16) error {
	rs := tunnelECNRuleset([]uint16{port})
	c.CreateTable(rs.table)
	err := send(c, rs)
	if !errors.Is(err, syscall.EEXIST) {
		return err
	}
	if err := c.SetAddElements(rs.sets[0].set, portElements([]uint16{port})); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("add port %d to nftables set %s/%s: %w", port, TunnelECNTable, tunnelECNSet, err)
	}
	return nil
}

// CheckTunnelECN verifies the table's rules and that its set holds port.
func CheckTunnelECN(c *nftables.Conn, port uint16) error {
	rs := tunnelECNRuleset(nil)
	ok, err := tableExists(c, rs.table)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("nftables table %s %q is missing", "inet", TunnelECNTable)
	}
	got, err := c.GetRules(rs.table, rs.chains[0])
	if err != nil {
		return fmt.Errorf("list rules of chain %s/%s: %w", TunnelECNTable, tunnelECNChain, err)
	}
	if err := sameRules(got, rs.rules[tunnelECNChain]); err != nil {
		return fmt.Errorf("chain %s/%s: %w", TunnelECNTable, tunnelECNChain, err)
	}
	s, err := c.GetSetByName(rs.table, tunnelECNSet)
	if err != nil {
		return fmt.Errorf("nftables set %s/%s: %w", TunnelECNTable, tunnelECNSet, err)
	}
	els, err := c.GetSetElements(s)
	if err != nil {
		return fmt.Errorf("list elements of set %s/%s: %w", TunnelECNTable, tunnelECNSet, err)
	}
	want := binary.BigEndian.AppendUint16(nil, port)
	if !slices.ContainsFunc(els, func(e nftables.SetElement) bool { return string(e.Key) == string(want) }) {
		return fmt.Errorf("nftables set %s/%s lacks port %d", TunnelECNTable, tunnelECNSet, port)
	}
	return nil
}
