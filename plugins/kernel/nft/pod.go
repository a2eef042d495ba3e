package nft

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/netclass-dev/netclass/conf/qos"
)

// PodQoSTable names the table holding the QoS rules of an interface without
// a host end, in the pod's namespace: one `netdev` table per interface, so
// DEL and CHECK touch nothing else.
func PodQoSTable(ifname string) string { return "netclass_" + ifname }

const podChain = "egress"

// PodEgressHook names the kernel feature the pod-side rules need.
const PodEgressHook = "the nftables netdev egress hook (Linux 5.16 or later)"

func podTable(ifname string) *nftables.Table {
	return &nftables.Table{Name: PodQoSTable(ifname), Family: nftables.TableFamilyNetdev}
}

// legacyPodTable is where netclass before host-side enforcement kept the
// same rules (an inet table at postrouting, whose drops returned EPERM to
// the sender); DeletePodQoS removes it from attachments made then.
func legacyPodTable(ifname string) *nftables.Table {
	return &nftables.Table{Name: PodQoSTable(ifname), Family: nftables.TableFamilyINet}
}

// podRuleset renders the table:
//
//	table netdev netclass_IF {
//	  chain egress { type filter hook egress device IF priority filter; <renderPlan's main rules> }
//	  chain rN { ... }
//	}
func podRuleset(ifname string, plan *qos.Plan) *ruleset {
	return netdevRuleset(podTable(ifname), podChain, nftables.ChainHookEgress, ifname, plan)
}

// netdevRuleset renders a plan's rules into table t: a base chain of the
// device's hook (priority filter, policy accept) and its rN chains. The
// chain first drops IP frames whose skb protocol says otherwise: a packet
// socket (CAP_NET_RAW, every default pod's) gives its frames any protocol
// (sll_protocol), and such a frame would match none of the rules keyed on
// it, the re-marking of the admin's DSCP policy and the meters included.
func netdevRuleset(t *nftables.Table, chain string, hook *nftables.ChainHook, device string, plan *qos.Plan) *ruleset {
	base := &nftables.Chain{
		Name: chain, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: hook, Priority: nftables.ChainPriorityFilter,
		Device: device, Policy: policyAccept(),
	}
	rs := &ruleset{table: t, chains: []*nftables.Chain{base}, rules: map[string][][]expr.Any{
		chain: {dropMislabelled(false), dropMislabelled(true)},
	}}
	renderPlan(rs, base, "", plan)
	return rs
}

// ApplyPodQoS installs (or replaces) the DSCP and meter rules of an
// interface in the namespace c is connected to. A kernel without the netdev
// egress hook gets a *FeatureError: never a hook whose drops reach the
// sender's socket.
func ApplyPodQoS(c *nftables.Conn, ifname string, plan *qos.Plan) error {
	return unsupported(install(c, podRuleset(ifname, plan)), PodEgressHook)
}

// CheckPodQoS verifies the interface's table holds exactly the rules and set
// elements the plan renders.
func CheckPodQoS(c *nftables.Conn, ifname string, plan *qos.Plan) error {
	return verify(c, podRuleset(ifname, plan))
}

// DeletePodQoS removes the interface's table, and the table an older
// netclass made for it; none is success.
func DeletePodQoS(c *nftables.Conn, ifname string) error {
	var err error
	for range 3 { // a table deleted by someone else in between fails the batch: look again
		var found bool
		if found, err = queueDeletePod(c, ifname); err != nil || !found {
			return err
		}
		if err = c.Flush(); !errors.Is(err, syscall.ENOENT) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("delete nftables table %q: %w", PodQoSTable(ifname), err)
	}
	return nil
}

func queueDeletePod(c *nftables.Conn, ifname string) (bool, error) {
	tables, err := podTables(c, ifname)
	for _, t := range tables {
		c.DelTable(t)
	}
	return len(tables) > 0, err
}

// podTables returns the interface's tables that exist: this netclass's and
// an older one's.
func podTables(c *nftables.Conn, ifname string) ([]*nftables.Table, error) {
	tables, err := c.ListTables()
	if err != nil {
		return nil, fmt.Errorf("list nftables tables: %w", err)
	}
	var found []*nftables.Table
	for _, want := range []*nftables.Table{podTable(ifname), legacyPodTable(ifname)} {
		for _, got := range tables {
			if got.Name == want.Name && got.Family == want.Family {
				found = append(found, want)
			}
		}
	}
	return found, nil
}

// HasAnyPodQoS reports whether the pod holds a table of the interface's,
// this netclass's or an older one's.
func HasAnyPodQoS(c *nftables.Conn, ifname string) (bool, error) {
	tables, err := podTables(c, ifname)
	return len(tables) > 0, err
}

// HasPodQoS reports whether the interface's table exists.
func HasPodQoS(c *nftables.Conn, ifname string) (bool, error) {
	return tableExists(c, podTable(ifname))
}
