package nft

import (
	"net"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The host's port guard, the switch-port security of bridged pod ports:
//
//	table bridge netclass_guard {
//	  set closed { type ifname }               # ports that pass nothing yet...
//	  set opened { type ifname }               # ...unless opened since (guardopen.go)
//	  map ports { type ifname : verdict }       # host end -> goto its source check
//	  chain prerouting { type filter hook prerouting priority -300; iifname @closed iifname != @opened drop; iifname vmap @ports }
//	  chain forward    { type filter hook forward priority -300; oifname @closed oifname != @opened drop }
//	  chain output     { type filter hook output priority -300; oifname @closed oifname != @opened drop }
//	  chain port/HOSTIF {                       # what the pod may send
//	    ether saddr != MAC drop
//	    ether type { 8021q, 8021ad } drop        # no tagged frames into the segment
//	    ether type arp arp saddr ether != MAC drop; [arp saddr ip @port/HOSTIF/v4 accept; arp saddr ip 0.0.0.0 accept; drop]
//	    ether type ip   udp sport 67 drop; icmp type redirect drop; [ip saddr @v4 accept; DHCP from 0.0.0.0 accept; drop]
//	    ether type ip6  icmpv6 type { nd-router-advert, nd-redirect } drop; udp sport 547 drop;
//	                    [icmpv6 type nd-neighbor-advert @th,64,128 != @v6 drop;
//	                     ip6 saddr :: icmpv6 type nd-neighbor-solicit @th,64,128 != @v6 drop;
//	                     ip6 saddr @v6 accept; ip6 saddr :: icmpv6 accept (DAD, MLD); drop]
//	  }
//	}
//
// The bracketed source checks apply when the attachment has addresses (a
// pod without IPAM picks its own). A neighbour advertisement may name only
// the pod's own addresses as its target, and a duplicate address probe only
// probe them: an advertisement for a neighbour's or the gateway's address
// would have the segment send that address's traffic to the pod, and an
// answer to (or a probe of) another pod's address makes its duplicate
// address detection fail, so it never starts. Priority -300 runs first of netclass's
// bridge hooks: a spoofed frame is dropped before it is metered (QoS, -200)
// or reaches the policy. Everything lives on the host: nothing in the pod,
// whatever its capabilities, reaches it; a frame a pod builds itself
// (AF_PACKET, CAP_NET_RAW) passes the same check as any other.
const GuardTable = "netclass_guard"

// GuardFeature names the kernel feature the guard needs.
const GuardFeature = "the nftables bridge family with verdict maps"

const guardClosedSet, guardOpenedSet, guardPortsMap = "closed", "opened", "ports"

// Guard is what a pod's port lets through from the pod.
type Guard struct {
	MAC net.HardwareAddr
	// CheckIPs: source addresses are checked (the attachment has IPAM
	// addresses). V4 and V6 are the addresses the pod may send from: its
	// own, and on IPv6 its link-local ones.
	CheckIPs bool
	V4, V6   []netip.Addr
}

func guardTable() *nftables.Table {
	return &nftables.Table{Name: GuardTable, Family: nftables.TableFamilyBridge}
}

var guardShared = func() *sharedTable {
	t := guardTable()
	ports := &nftables.Set{Table: t, Name: guardPortsMap, IsMap: true, KeyType: nftables.TypeIFName,
		DataType: nftables.TypeVerdict, ID: 1, KeyByteOrder: binaryutil.NativeEndian}
	closed := &nftables.Set{Table: t, Name: guardClosedSet, KeyType: nftables.TypeIFName, ID: 2, KeyByteOrder: binaryutil.NativeEndian}
	opened := &nftables.Set{Table: t, Name: guardOpenedSet, KeyType: nftables.TypeIFName, ID: 3, KeyByteOrder: binaryutil.NativeEndian}
	prio := nftables.ChainPriority(-300)
	base := func(name string, hook *nftables.ChainHook) *nftables.Chain {
		return &nftables.Chain{Name: name, Table: t, Type: nftables.ChainTypeFilter, Hooknum: hook, Priority: &prio, Policy: policyAccept()}
	}
	pre, fwd, out := base("prerouting", nftables.ChainHookPrerouting), base("forward", nftables.ChainHookForward), base("output", nftables.ChainHookOutput)
	// closedDrop: the port's name in closed and not in opened (the
	// register holds the name the first lookup read)
	closedDrop := func(input bool) []expr.Any {
		return concat(ifnameInSet(input, guardClosedSet, 2),
			[]expr.Any{&expr.Lookup{SourceRegister: 1, SetName: guardOpenedSet, SetID: 3, Invert: true}, verdict(expr.VerdictDrop)})
	}
	return &sharedTable{
		table: t, maps: []*nftables.Set{ports}, sets: []*nftables.Set{closed, opened},
		bases: []*nftables.Chain{pre, fwd, out},
		rules: map[string][][]expr.Any{
			pre.Name: {closedDrop(true), dispatchByIifname(guardPortsMap, 1)},
			fwd.Name: {closedDrop(false)},
			out.Name: {closedDrop(false)},
		},
		prefixes: []string{"port/"}, feature: GuardFeature,
	}
}()

// GuardChain names the chain checking what the host end's pod sends.
func GuardChain(hostIf string) string { return "port/" + hostIf }

// guardPort renders the host end's objects.
func guardPort(hostIf string, g Guard) *portObjects {
	p := guardShared.newPort(0)
	name := GuardChain(hostIf)
	p.rs.chains = []*nftables.Chain{{Name: name, Table: p.rs.table}}
	p.rs.rules[name] = guardRules(p.rs, name+"/", g)
	p.elements[guardPortsMap] = []nftables.SetElement{{Key: ifname(hostIf), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: name}}}
	return p
}

// guardRules renders what a pod may send, its address sets named
// setPrefix+"v4|v6"; the bridge and netdev families read frames alike.
func guardRules(rs *ruleset, setPrefix string, g Guard) [][]expr.Any {
	rules := [][]expr.Any{
		concat(matchEtherSaddrNot(g.MAC), []expr.Any{verdict(expr.VerdictDrop)}),
		concat(matchEtherType(unix.ETH_P_8021Q), []expr.Any{verdict(expr.VerdictDrop)}),
		concat(matchEtherType(unix.ETH_P_8021AD), []expr.Any{verdict(expr.VerdictDrop)}),
		concat(matchEtherType(unix.ETH_P_ARP), matchArpShaNot(g.MAC), []expr.Any{verdict(expr.VerdictDrop)}),
		concat(matchEtherType(unix.ETH_P_IP), matchL4proto(unix.IPPROTO_UDP), matchSport(67), []expr.Any{verdict(expr.VerdictDrop)}),
		concat(matchEtherType(unix.ETH_P_IP), matchL4proto(unix.IPPROTO_ICMP), matchICMPType(5), []expr.Any{verdict(expr.VerdictDrop)}),
		concat(matchEtherType(unix.ETH_P_IPV6), matchL4proto(unix.IPPROTO_ICMPV6), matchICMPType(134), []expr.Any{verdict(expr.VerdictDrop)}),
		concat(matchEtherType(unix.ETH_P_IPV6), matchL4proto(unix.IPPROTO_ICMPV6), matchICMPType(137), []expr.Any{verdict(expr.VerdictDrop)}),
		concat(matchEtherType(unix.ETH_P_IPV6), matchL4proto(unix.IPPROTO_UDP), matchSport(547), []expr.Any{verdict(expr.VerdictDrop)}),
	}
	if g.CheckIPs {
		rules = append(rules, guardSources(rs, setPrefix, g)...)
	}
	return rules
}

// guardSources renders the source address checks: ARP, IPv4, IPv6.
func guardSources(rs *ruleset, setPrefix string, g Guard) [][]expr.Any {
	v4 := hostSet(rs, setPrefix+"v4", false, g.V4)
	v6 := hostSet(rs, setPrefix+"v6", true, g.V6)
	arp, ip4, ip6 := matchEtherType(unix.ETH_P_ARP), matchEtherType(unix.ETH_P_IP), matchEtherType(unix.ETH_P_IPV6)
	unspec4 := []byte{0, 0, 0, 0}
	return [][]expr.Any{
		concat(arp, matchArpSpaInSet(v4.Name, v4.ID), []expr.Any{verdict(expr.VerdictAccept)}),
		concat(arp, matchPayload(expr.PayloadBaseNetworkHeader, 14, unspec4), []expr.Any{verdict(expr.VerdictAccept)}),
		concat(arp, []expr.Any{verdict(expr.VerdictDrop)}),
		concat(ip4, matchAddrInSet(false, true, v4.Name, v4.ID), []expr.Any{verdict(expr.VerdictAccept)}),
		concat(ip4, matchPayload(expr.PayloadBaseNetworkHeader, 12, unspec4), matchL4proto(unix.IPPROTO_UDP),
			matchSport(68), matchDport(67), []expr.Any{verdict(expr.VerdictAccept)}),
		concat(ip4, []expr.Any{verdict(expr.VerdictDrop)}),
		concat(ip6, matchL4proto(unix.IPPROTO_ICMPV6), matchICMPType(136), ndTargetNotIn(v6), []expr.Any{verdict(expr.VerdictDrop)}),
		concat(ip6, matchPayload(expr.PayloadBaseNetworkHeader, 8, make([]byte, 16)), matchL4proto(unix.IPPROTO_ICMPV6), matchICMPType(135),
			ndTargetNotIn(v6), []expr.Any{verdict(expr.VerdictDrop)}),
		concat(ip6, matchAddrInSet(true, true, v6.Name, v6.ID), []expr.Any{verdict(expr.VerdictAccept)}),
		concat(ip6, matchPayload(expr.PayloadBaseNetworkHeader, 8, make([]byte, 16)), matchL4proto(unix.IPPROTO_ICMPV6), []expr.Any{verdict(expr.VerdictAccept)}),
		concat(ip6, []expr.Any{verdict(expr.VerdictDrop)}),
	}
}

// ndTargetNotIn: the target address of a neighbour solicitation or
// advertisement (`@th,64,128`) is not in set.
func ndTargetNotIn(set *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 8, Len: 16},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID, Invert: true},
	}
}

// hostSet adds a named set of single addresses.
func hostSet(rs *ruleset, name string, v6 bool, addrs []netip.Addr) *nftables.Set {
	s := &nftables.Set{Table: rs.table, Name: name, KeyType: nftables.TypeIPAddr, ID: rs.setID()}
	if v6 {
		s.KeyType = nftables.TypeIP6Addr
	}
	els := make([]nftables.SetElement, 0, len(addrs))
	for _, a := range addrs {
		els = append(els, nftables.SetElement{Key: a.AsSlice()})
	}
	rs.sets = append(rs.sets, setWithElements{set: s, elements: els})
	return s
}

// InstallGuard puts the host end's port under guard: closed (passing
// nothing until OpenGuard) when asked, then its source check. A closed
// port is closed first, so the port is never open unchecked.
func InstallGuard(c *nftables.Conn, hostIf string, g Guard, closed bool) error {
	if closed {
		if err := closeGuard(c, hostIf); err != nil {
			return err
		}
	}
	return guardShared.sync(c, map[string]*portObjects{hostIf: guardPort(hostIf, g)})[hostIf].Err
}

// CheckGuard verifies the host end's source check (not whether it is open:
// netclass-dra opens it once the port's policy is in place).
func CheckGuard(c *nftables.Conn, hostIf string, g Guard) error {
	return guardShared.check(c, hostIf, guardPort(hostIf, g))
}

// GuardedPorts lists the host ends that have a source check.
func GuardedPorts(c *nftables.Conn) (map[string]bool, error) {
	st, err := guardShared.read(c)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for p := range st.chains {
		out[p] = true
	}
	return out, nil
}

// HasGuard reports whether the host end has a source check.
func HasGuard(c *nftables.Conn, hostIf string) (bool, error) {
	st, err := guardShared.read(c)
	if err != nil {
		return false, err
	}
	return st.has(hostIf), nil
}
