package nft

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/qos"
)

// HostIngressTable names the table holding the QoS rules of a routed
// veth's host end (a primary CNI's port outside any bridge: upstream ptp,
// Calico), in the host's namespace: one `netdev` table per host end, hooked
// at its ingress, where the pod's packets arrive out of the pod's reach.
func HostIngressTable(hostIf string) string { return "netclass_in_" + hostIf }

// HostIngressHook names the kernel feature the host end's rules need.
const HostIngressHook = "the nftables netdev ingress hook"

const hostIngressChain = "ingress"

func hostIngressTable(hostIf string) *nftables.Table {
	return &nftables.Table{Name: HostIngressTable(hostIf), Family: nftables.TableFamilyNetdev}
}

// hostIngressRuleset renders the table:
//
//	table netdev netclass_in_HOSTIF {
//	  chain ingress { type filter hook ingress device HOSTIF priority filter; <renderPlan's main rules> }
//	  chain rN { ... }
//	}
func hostIngressRuleset(hostIf string, plan *qos.Plan) *ruleset {
	return netdevRuleset(hostIngressTable(hostIf), hostIngressChain, nftables.ChainHookIngress, hostIf, plan)
}

// SyncHostIngressQoS brings the host end's table to the plan in place (a
// plan without rules removes it), reporting whether anything changed.
func SyncHostIngressQoS(c *nftables.Conn, hostIf string, plan *qos.Plan) (bool, error) {
	if !plan.NeedsRules() {
		found, err := HasHostIngressQoS(c, hostIf)
		if err != nil || !found {
			return false, err
		}
		return true, DeleteHostIngressQoS(c, hostIf)
	}
	return syncTable(c, hostIngressRuleset(hostIf, plan), HostIngressHook)
}

// CheckHostIngressQoS verifies the host end's table holds exactly the
// rules and set elements the plan renders.
func CheckHostIngressQoS(c *nftables.Conn, hostIf string, plan *qos.Plan) error {
	return verify(c, hostIngressRuleset(hostIf, plan))
}

// HasHostIngressQoS reports whether the host end's table exists.
func HasHostIngressQoS(c *nftables.Conn, hostIf string) (bool, error) {
	return tableExists(c, hostIngressTable(hostIf))
}

// DeleteHostIngressQoS removes the host end's table; none is success (the
// table outlives its device, whose base chain goes with it).
func DeleteHostIngressQoS(c *nftables.Conn, hostIf string) error {
	found, err := HasHostIngressQoS(c, hostIf)
	if err != nil || !found {
		return err
	}
	c.DelTable(hostIngressTable(hostIf))
	if err := c.Flush(); err != nil {
		return fmt.Errorf("delete nftables table netdev %s: %w", HostIngressTable(hostIf), err)
	}
	return nil
}

// HostEnds lists the host ends the host holds rules of: the ports of the
// shared table and the host ends' own ingress tables.
func HostEnds(c *nftables.Conn) ([]string, error) {
	ts, err := readTable(c)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for h := range ts.elements {
		seen[h] = true
	}
	for h := range ts.chains {
		seen[h] = true
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyNetdev)
	if err != nil {
		return nil, fmt.Errorf("list nftables tables: %w", err)
	}
	for _, t := range tables {
		if h, ok := strings.CutPrefix(t.Name, HostIngressTable("")); ok && h != "" {
			seen[h] = true
		}
	}
	out := make([]string, 0, len(seen))
	for h := range seen {
		out = append(out, h)
	}
	slices.Sort(out)
	return out, nil
}
