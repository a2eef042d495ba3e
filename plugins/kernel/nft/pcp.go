package nft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// The 802.1p priority of frames leaving through a VLAN device. The VLAN
// device writes the PCP of the tag it inserts from the packet's
// skb->priority through its egress-qos-map (plugins/kernel/link sets it to
// N:N for N = 1..7), so skb->priority must be the PCP by then. This table
// sets it from the packet's DSCP, at the VLAN device's own egress hook: it
// sees every packet the device sends, after any marking (the host port's
// at bridge prerouting, the pod's at its interface's egress hook, priority
// filter), whether the device is the shared sub-interface of a VLAN's
// bridge on the host or, with linkInContainer, the pod's interface:
//
//	table netdev netclass_pcp_DEV {
//	  map pcp4 { type integer (1 byte) : classid; elements = { DSCP<<2 : PCP, ... } }
//	  map pcp6 { type integer (2 bytes) : classid; elements = { DSCP<<6 : PCP, ... } }
//	  chain egress {
//	    type filter hook egress device DEV priority filter + 10; policy accept;
//	    meta protocol ip  meta priority set (ip[1] & 0xfc) map @pcp4
//	    meta protocol ip6 meta priority set (ip6[0:2] & 0x0fc0) map @pcp6
//	  }
//	}
//
// The maps are keyed by the DSCP bits where they sit in the header, so no
// shift (and no byte order) is involved; every DSCP value has an element,
// so a lookup never misses. Frames that are not IP keep their priority.

// PCPTable names the table setting the priority of a VLAN device's frames.
func PCPTable(dev string) string { return "netclass_pcp_" + dev }

const (
	pcpChain    = "egress"
	pcpPriority = 10 // after the pod's marking (priority filter, 0)
)

// pcpKey4 and pcpKey6 are the maps' key types: integers of 1 and 2 bytes.
var pcpKey4, pcpKey6 = integerType(1), integerType(2)

func integerType(n uint32) nftables.SetDatatype {
	t := nftables.TypeInteger
	t.Bytes = n
	return t
}

func pcpTable(dev string) *nftables.Table {
	return &nftables.Table{Name: PCPTable(dev), Family: nftables.TableFamilyNetdev}
}

// pcpRuleset renders the table for dev with pcp[d] the PCP of DSCP d.
func pcpRuleset(dev string, pcp [64]uint8) *ruleset {
	t := pcpTable(dev)
	prio := nftables.ChainPriority(pcpPriority)
	base := &nftables.Chain{
		Name: pcpChain, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookEgress, Priority: &prio, Device: dev, Policy: policyAccept(),
	}
	rs := &ruleset{table: t, chains: []*nftables.Chain{base}, rules: map[string][][]expr.Any{}}
	for _, v6 := range []bool{false, true} {
		name, key, els := "pcp4", pcpKey4, make([]nftables.SetElement, 0, len(pcp))
		if v6 {
			name, key = "pcp6", pcpKey6
		}
		for d, p := range pcp {
			els = append(els, nftables.SetElement{Key: dscpInPlace(v6, uint8(d)), Val: binaryutil.NativeEndian.PutUint32(uint32(p))})
		}
		set := &nftables.Set{Table: t, Name: name, ID: rs.setID(), IsMap: true, KeyType: key, DataType: nftables.TypeClassID}
		rs.sets = append(rs.sets, setWithElements{set: set, elements: els})
		rs.rules[pcpChain] = append(rs.rules[pcpChain], concat(matchProtocol(v6), setPriorityFromDSCP(v6, name, set.ID)))
	}
	return rs
}

// dscpInPlace is the DSCP d where the header holds it: the IPv4 TOS byte
// (d<<2), or the IPv6 header's first two bytes (version and traffic
// class: d<<6 of them), with the other bits zero.
func dscpInPlace(v6 bool, d uint8) []byte {
	if v6 {
		return binary.BigEndian.AppendUint16(nil, uint16(d)<<6)
	}
	return []byte{d << 2}
}

// setPriorityFromDSCP: `meta priority set <dscp bits> map @set`.
func setPriorityFromDSCP(v6 bool, set string, setID uint32) []expr.Any {
	off, mask := uint32(1), []byte{0xfc}
	if v6 {
		off, mask = 0, []byte{0x0f, 0xc0}
	}
	n := uint32(len(mask))
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)},
		&expr.Lookup{SourceRegister: 1, SetName: set, SetID: setID, IsDestRegSet: true, DestRegister: 1},
		&expr.Meta{Key: expr.MetaKeyPRIORITY, SourceRegister: true, Register: 1},
	}
}

// ApplyPCP makes dev's frames carry pcp[DSCP] as their 802.1p priority, in
// the namespace c is connected to: the table is created, or replaced in
// one transaction when it holds another map (a running pod's frames switch
// maps at once), or left alone when it already holds this one. A kernel
// without the netdev egress hook gets a *FeatureError.
func ApplyPCP(c *nftables.Conn, dev string, pcp [64]uint8) error {
	rs := pcpRuleset(dev, pcp)
	c.CreateTable(rs.table)
	err := send(c, rs)
	if !errors.Is(err, syscall.EEXIST) {
		return unsupported(err, PodEgressHook)
	}
	if verifyPCP(c, rs) == nil {
		return nil
	}
	return unsupported(install(c, rs), PodEgressHook)
}

// CheckPCP verifies dev's table holds exactly the rules and map pcp renders.
func CheckPCP(c *nftables.Conn, dev string, pcp [64]uint8) error {
	return verifyPCP(c, pcpRuleset(dev, pcp))
}

func verifyPCP(c *nftables.Conn, rs *ruleset) error {
	if err := verify(c, rs); err != nil {
		return err
	}
	for _, s := range rs.sets {
		if err := sameMap(c, rs.table, s); err != nil {
			return err
		}
	}
	return nil
}

// sameMap compares a map's elements, values included.
func sameMap(c *nftables.Conn, t *nftables.Table, want setWithElements) error {
	s, err := c.GetSetByName(t, want.set.Name)
	if err != nil {
		return fmt.Errorf("nftables map %s/%s: %w", t.Name, want.set.Name, err)
	}
	got, err := c.GetSetElements(s)
	if err != nil {
		return fmt.Errorf("list elements of map %s/%s: %w", t.Name, want.set.Name, err)
	}
	vals := map[string][]byte{}
	for _, e := range got {
		vals[string(e.Key)] = e.Val
	}
	for _, e := range want.elements {
		if v, ok := vals[string(e.Key)]; !ok || !bytes.Equal(v, e.Val) {
			return fmt.Errorf("nftables map %s/%s: key %x maps to %x, want %x", t.Name, want.set.Name, e.Key, v, e.Val)
		}
	}
	if len(got) != len(want.elements) {
		return fmt.Errorf("nftables map %s/%s has %d elements, want %d", t.Name, want.set.Name, len(got), len(want.elements))
	}
	return nil
}

// DeletePCP removes dev's table; none is success. A table outlives its
// device (a netdev chain waits for a device of its name to come back), so
// whoever deletes the device deletes it.
func DeletePCP(c *nftables.Conn, dev string) error {
	ok, err := tableExists(c, pcpTable(dev))
	if err != nil || !ok {
		return err
	}
	return deleteTable(c, pcpTable(dev))
}
