package nft

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"

	"github.com/netclass-dev/netclass/conf/qos"
)

// The host's shared table of port QoS:
//
//	table bridge netclass_qos {
//	  map ports { type ifname : verdict }                   # host end -> goto its port chain
//	  chain prerouting { type filter hook prerouting priority -200; iifname vmap @ports }
//	  chain port/HOSTIF { <renderPlan's main rules> }        # one per host end
//	  chain port/HOSTIF/rN { ... }                           # one per rule
//	  set port/HOSTIF/rN_v4 { ... }
//	}
//
// Priority -200 (the bridge family's filter priority) runs after the MAC
// spoof check (-300), so a spoofed frame is dropped before it is metered.
// An interface name cannot contain '/', so no port's names are a prefix of
// another port's. The table and its base chain stay once created: with no
// port they cost one lookup in an empty map per bridged frame.
const PortQoSTable = "netclass_qos"

// PortFeature names the kernel feature the host-side rules need.
const PortFeature = "the nftables bridge family with verdict maps"

const (
	portBase     = "prerouting"
	portMap      = "ports"
	portPriority = -200
	portMapID    = 1 // the map's set ID when a transaction creates it
)

func portTable() *nftables.Table {
	return &nftables.Table{Name: PortQoSTable, Family: nftables.TableFamilyBridge}
}

// PortChain names the chain of a host end's rules; the port's rule chains
// and sets are named PortChain(hostIf)+"/...".
func PortChain(hostIf string) string { return "port/" + hostIf }

func portMapSet() *nftables.Set {
	// Host byte order for the key is what nft itself records for ifname
	// keys: without it `nft list` prints them reversed (as "").
	return &nftables.Set{Table: portTable(), Name: portMap, IsMap: true,
		KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict, ID: portMapID,
		KeyByteOrder: binaryutil.NativeEndian}
}

// baseRuleset is the shared part: the table's base chain and its rule.
func baseRuleset() *ruleset {
	t := portTable()
	prio := nftables.ChainPriority(portPriority)
	base := &nftables.Chain{
		Name: portBase, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: &prio, Policy: policyAccept(),
	}
	return &ruleset{table: t, chains: []*nftables.Chain{base}, rules: map[string][][]expr.Any{
		portBase: {dispatchByIifname(portMap, portMapID)},
	}}
}

// portRuleset is one host end's part: its chains and sets.
func portRuleset(hostIf string, plan *qos.Plan) *ruleset {
	return portRulesetAfter(hostIf, plan, portMapID)
}

// portRulesetAfter is portRuleset with set IDs after lastSet, so that the
// new sets of many ports in one transaction have IDs of their own.
func portRulesetAfter(hostIf string, plan *qos.Plan, lastSet uint32) *ruleset {
	t := portTable()
	main := &nftables.Chain{Name: PortChain(hostIf), Table: t}
	rs := &ruleset{table: t, chains: []*nftables.Chain{main}, rules: map[string][][]expr.Any{}, lastSet: lastSet}
	renderPlan(rs, main, PortChain(hostIf)+"/", plan)
	return rs
}

func portElement(hostIf string) nftables.SetElement {
	return nftables.SetElement{Key: ifname(hostIf), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: PortChain(hostIf)}}
}

// ApplyPortQoS installs, or atomically replaces, the DSCP and meter rules of
// the frames the host end receives from its pod (the pod's egress), in the
// namespace c is connected to. The shared table is created, or repaired,
// in the same transaction.
func ApplyPortQoS(c *nftables.Conn, hostIf string, plan *qos.Plan) error {
	st, err := readPort(c, hostIf)
	if err != nil {
		return err
	}
	if !st.baseOK {
		if err := queueBase(c); err != nil {
			return err
		}
	}
	if _, err := st.queueDelete(c, hostIf); err != nil {
		return err
	}
	if err := queue(c, portRuleset(hostIf, plan)); err != nil {
		return err
	}
	if err := c.SetAddElements(portMapSet(), []nftables.SetElement{portElement(hostIf)}); err != nil {
		return fmt.Errorf("map port %q: %w", hostIf, err)
	}
	if err := c.Flush(); err != nil {
		return unsupported(fmt.Errorf("install the rules of port %q in nftables table bridge %s: %w", hostIf, PortQoSTable, err), PortFeature)
	}
	return nil
}

// queueBase (re)creates the table's shared part: whatever exists is kept
// but the base chain's rules, which are replaced by the one rendered.
func queueBase(c *nftables.Conn) error {
	base := baseRuleset()
	c.AddTable(base.table)
	if err := c.AddSet(portMapSet(), nil); err != nil {
		return fmt.Errorf("add map %q: %w", portMap, err)
	}
	c.AddChain(base.chains[0])
	c.FlushChain(base.chains[0])
	for _, exprs := range base.rules[portBase] {
		c.AddRule(&nftables.Rule{Table: base.table, Chain: base.chains[0], Exprs: exprs})
	}
	return nil
}

// DeletePortQoS removes the host end's map element, chains and sets; none
// is success. It needs only the host end's name: it works as well when the
// host end, or the whole pod, is gone.
func DeletePortQoS(c *nftables.Conn, hostIf string) error {
	st, err := readPort(c, hostIf)
	if err != nil {
		return err
	}
	if found, err := st.queueDelete(c, hostIf); err != nil || !found {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("delete the rules of port %q from nftables table bridge %s: %w", hostIf, PortQoSTable, err)
	}
	return nil
}

// HasPortQoS reports whether anything of the host end's port exists.
func HasPortQoS(c *nftables.Conn, hostIf string) (bool, error) {
	st, err := readPort(c, hostIf)
	return err == nil && (st.element != nil || len(st.chains) > 0 || len(st.sets) > 0), err
}

// CheckPortQoS verifies the shared table's base, the host end's map entry,
// and that its chains and sets hold exactly what the plan renders.
func CheckPortQoS(c *nftables.Conn, hostIf string, plan *qos.Plan) error {
	st, err := readPort(c, hostIf)
	switch {
	case err != nil:
		return err
	case !st.table:
		return fmt.Errorf("nftables table bridge %s is missing", PortQoSTable)
	case !st.baseOK:
		return fmt.Errorf("nftables table bridge %s: chain %s or map %s differs from netclass's", PortQoSTable, portBase, portMap)
	case st.element == nil:
		return fmt.Errorf("nftables map bridge %s %s has no entry for %q", PortQoSTable, portMap, hostIf)
	case st.element.Kind != expr.VerdictGoto || st.element.Chain != PortChain(hostIf):
		return fmt.Errorf("nftables map bridge %s %s sends %q elsewhere than chain %s", PortQoSTable, portMap, hostIf, PortChain(hostIf))
	}
	return verify(c, portRuleset(hostIf, plan))
}
