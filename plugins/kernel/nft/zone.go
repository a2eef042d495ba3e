package nft

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Conntrack zones of netclass's bridges. The host policy accepts a packet
// of a connection the host's conntrack knows (ct state established); a
// bridge's IP traffic reaches conntrack through br_netfilter, so without
// zones every bridge of the node shares one connection table, and tenants
// choose their subnets: pods of one network could open the 5-tuple of a
// flow of another network's pods (same addresses, ports) and have that
// network's policy take a forged packet as its reply. Each netclass bridge
// has its own zone:
//
//	table inet netclass_zone {
//	  set local { type ifname . ether_addr }     # bridge . its own MAC
//	  map zones { type ifname : integer }         # bridge -> conntrack zone
//	  chain prerouting { type filter hook prerouting priority raw;
//	                     iifname . ether daddr @local return;   # to the node: routed or local, the node's zone
//	                     ct zone set iifname map @zones }       # bridged between the bridge's ports
//	}
//
// Frames to the bridge's own MAC stay in the node's zone (0): the node
// routes or receives them, and their replies come back from elsewhere (an
// uplink, the node itself) in that zone. link.EnsureBridge fixes a new
// bridge's MAC, so it does not follow its ports'.
const ZoneTable = "netclass_zone"

const zoneLocalSet, zoneMap = "local", "zones"

// ZoneBridge is a bridge that gets a conntrack zone.
type ZoneBridge struct {
	Name  string
	Index int
	MAC   net.HardwareAddr
}

// Zone is the bridge's conntrack zone, from its interface index: every
// writer computes the same without reading, and two bridges of a node
// share one only when their indexes are 65535 apart (EnsureZones refuses
// the newer one, never zone 0, the node's own).
func (b ZoneBridge) Zone() uint16 { return uint16(b.Index%65535) + 1 }

// ZoneCollisionError: the bridge's zone is another bridge's.
type ZoneCollisionError struct{ Bridge, Other string }

func (e *ZoneCollisionError) Error() string {
	return fmt.Sprintf("conntrack zone of bridge %q is bridge %q's (their interface indexes are 65535 apart); recreate the bridge", e.Bridge, e.Other)
}

func zoneObjects() (*nftables.Table, *nftables.Set, *nftables.Set, *nftables.Chain) {
	t := &nftables.Table{Name: ZoneTable, Family: nftables.TableFamilyINet}
	local := &nftables.Set{Table: t, Name: zoneLocalSet, ID: 1, Concatenation: true,
		KeyType: nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeEtherAddr)}
	zone := nftables.TypeInteger
	zone.Bytes = 2 // a conntrack zone, as nft types `ct zone`
	zones := &nftables.Set{Table: t, Name: zoneMap, ID: 2, IsMap: true, KeyType: nftables.TypeIFName, DataType: zone,
		KeyByteOrder: binaryutil.NativeEndian}
	prio := nftables.ChainPriorityRaw
	pre := &nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookPrerouting,
		Priority: prio, Policy: policyAccept()}
	return t, local, zones, pre
}

func zoneRules() [][]expr.Any {
	return [][]expr.Any{
		concat(matchEtherIif(), []expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 2, Base: expr.PayloadBaseLLHeader, Offset: 0, Len: 6},
			&expr.Lookup{SourceRegister: 1, SetName: zoneLocalSet, SetID: 1},
			verdict(expr.VerdictReturn),
		}),
		{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Lookup{SourceRegister: 1, IsDestRegSet: true, DestRegister: 2, SetName: zoneMap, SetID: 2},
			&expr.Ct{Key: expr.CtKeyZONE, Register: 2, SourceRegister: true},
		},
	}
}

// zoneBaseCurrent reports whether the chain holds zoneRules. google/nftables
// reads a `ct ... set` back without its source register (it does not decode
// NFTA_CT_SREG), so the second rule is compared up to its ct key.
func zoneBaseCurrent(rules []*nftables.Rule) bool {
	want := zoneRules()
	if len(rules) != len(want) || sameRules(rules[:1], want[:1]) != nil || len(rules[1].Exprs) != len(want[1]) {
		return false
	}
	last := len(want[1]) - 1
	ct, ok := rules[1].Exprs[last].(*expr.Ct)
	return ok && ct.Key == expr.CtKeyZONE && sameRules([]*nftables.Rule{{Exprs: rules[1].Exprs[:last]}}, [][]expr.Any{want[1][:last]}) == nil
}

// zoneState is what the zone table holds: each bridge's zone and MAC.
type zoneState struct {
	base  bool // the table, its sets and its rules are this version's
	zones map[string]uint16
	macs  map[string][]net.HardwareAddr
}

func readZones(c *nftables.Conn) (zoneState, error) {
	st := zoneState{zones: map[string]uint16{}, macs: map[string][]net.HardwareAddr{}}
	t, local, zones, pre := zoneObjects()
	ok, err := tableExists(c, t)
	if err != nil || !ok {
		return st, err
	}
	rules, err := c.GetRules(t, pre)
	if err != nil {
		return st, nil // no chain: made below
	}
	st.base = zoneBaseCurrent(rules)
	if els, err := c.GetSetElements(zones); err == nil {
		for _, e := range els {
			if len(e.Val) >= 2 {
				st.zones[trimIfname(e.Key)] = binary.NativeEndian.Uint16(e.Val)
			}
		}
	}
	if els, err := c.GetSetElements(local); err == nil {
		for _, e := range els {
			if len(e.Key) >= unix.IFNAMSIZ+6 {
				name := trimIfname(e.Key[:unix.IFNAMSIZ])
				st.macs[name] = append(st.macs[name], net.HardwareAddr(e.Key[unix.IFNAMSIZ:unix.IFNAMSIZ+6]))
			}
		}
	}
	return st, nil
}

// EnsureZones gives each bridge its conntrack zone and tells the node's own
// MAC of it, in one transaction. A bridge whose zone another bridge has is
// refused (its entry is not made: its ports must stay closed), the one
// found there first or, of two new, the one of the lower index keeping it.
// Before a bridge's entry is made or changed, fix is called for it (an
// error refuses the bridge): the entry holds the MAC it has now. When an
// entry is to be made, those of bridges that no longer exist (exists
// answers) are removed first; a sync whose bridges all have theirs reads
// the table and asks nothing else.
func EnsureZones(c *nftables.Conn, bridges []ZoneBridge, exists func(name string) bool, fix func(ZoneBridge) error) (map[string]error, error) {
	st, err := readZones(c)
	if err != nil {
		return nil, fmt.Errorf("read nftables table inet %s: %w", ZoneTable, err)
	}
	var todo []ZoneBridge
	for _, b := range bridges {
		if !st.holds(b) {
			todo = append(todo, b)
		}
	}
	if st.base && len(todo) == 0 {
		return map[string]error{}, nil
	}
	t, local, zones, pre := zoneObjects()
	if !st.base {
		queueZoneBase(c, t, local, zones, pre)
	}
	st.prune(c, local, zones, exists)
	refused, err := st.add(c, local, zones, todo, fix)
	if err != nil {
		return nil, err
	}
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("update nftables table inet %s: %w", ZoneTable, err)
	}
	return refused, nil
}

// prune queues the removal of the entries of bridges that no longer exist.
func (st zoneState) prune(c *nftables.Conn, local, zones *nftables.Set, exists func(name string) bool) {
	for name, z := range st.zones {
		if !exists(name) {
			delete(st.zones, name)
			queueZoneDelete(c, local, zones, name, z, st.macs[name])
		}
	}
}

// add queues the entries of the bridges, in the order of their indexes,
// and returns those refused.
func (st zoneState) add(c *nftables.Conn, local, zones *nftables.Set, bridges []ZoneBridge, fix func(ZoneBridge) error) (map[string]error, error) {
	bridges = slices.Clone(bridges)
	slices.SortFunc(bridges, func(a, b ZoneBridge) int { return a.Index - b.Index })
	refused := map[string]error{}
	for _, b := range bridges {
		if other := zoneHolder(st.zones, b); other != "" {
			refused[b.Name] = &ZoneCollisionError{Bridge: b.Name, Other: other}
			continue
		}
		if err := fix(b); err != nil {
			refused[b.Name] = err
			continue
		}
		if z, ok := st.zones[b.Name]; ok {
			queueZoneDelete(c, local, zones, b.Name, z, st.macs[b.Name])
		}
		st.zones[b.Name] = b.Zone()
		if err := queueZoneAdd(c, local, zones, b); err != nil {
			return nil, err
		}
	}
	return refused, nil
}

func queueZoneAdd(c *nftables.Conn, local, zones *nftables.Set, b ZoneBridge) error {
	if err := c.SetAddElements(zones, []nftables.SetElement{{Key: ifname(b.Name), Val: binary.NativeEndian.AppendUint16(nil, b.Zone())}}); err != nil {
		return err
	}
	return c.SetAddElements(local, []nftables.SetElement{{Key: ifnameKey(b.Name, b.MAC)}})
}

// holds: the table gives b its zone and its MAC alone.
func (st zoneState) holds(b ZoneBridge) bool {
	macs := st.macs[b.Name]
	return st.zones[b.Name] == b.Zone() && len(macs) == 1 && bytes.Equal(macs[0], b.MAC)
}

// zoneHolder names the other bridge that has b's zone, or "".
func zoneHolder(zones map[string]uint16, b ZoneBridge) string {
	for name, z := range zones {
		if name != b.Name && z == b.Zone() {
			return name
		}
	}
	return ""
}

func queueZoneBase(c *nftables.Conn, t *nftables.Table, local, zones *nftables.Set, pre *nftables.Chain) {
	c.AddTable(t)
	_ = c.AddSet(local, nil) // errors only for elements
	_ = c.AddSet(zones, nil)
	c.AddChain(pre)
	c.FlushChain(pre)
	for _, r := range zoneRules() {
		c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: r})
	}
}

func queueZoneDelete(c *nftables.Conn, local, zones *nftables.Set, name string, z uint16, macs []net.HardwareAddr) {
	_ = c.SetDeleteElements(zones, []nftables.SetElement{{Key: ifname(name), Val: binary.NativeEndian.AppendUint16(nil, z)}})
	for _, m := range macs {
		_ = c.SetDeleteElements(local, []nftables.SetElement{{Key: ifnameKey(name, m)}})
	}
}
