package nft

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/netclass-dev/netclass/conf/netpol"
)

// NetworkPolicy at the switch port: the policy of a pod whose interface is
// a veth in a host bridge lives on the host, where nothing in the pod
// reaches it, in two shared tables.
//
//	table inet netclass_pol {                   # stateful: conntrack of the host
//	  map egress  { type ifname . ether_addr : verdict }   # bridge . pod MAC -> goto eg/HOSTIF
//	  map ingress { type ifname . ether_addr : verdict }   # bridge . pod MAC -> goto in/HOSTIF
//	  map routed4 { type ifname . ipv4_addr : verdict }    # bridge . pod address -> goto in/HOSTIF
//	  map routed6 { type ifname . ipv6_addr : verdict }
//	  chain prerouting { type filter hook prerouting priority filter; iifname . ether saddr vmap @egress }
//	  chain forward    { type filter hook forward priority filter;
//	                     oifname . ether daddr vmap @ingress;                       # bridged to the pod
//	                     oifname . ip daddr vmap @routed4; oifname . ip6 daddr vmap @routed6 }  # routed into its bridge
//	  chain eg/HOSTIF { ct state established,related accept; NDP, DHCP client accept;
//	                    [jump eg/HOSTIF/admin]    # ClusterNetworkPolicy Admin tier (verdict_policy.go)
//	                    [meta nfproto F] [F daddr @eg/HOSTIF/aN_F] [meta l4proto P th dport A-B] accept; drop   (isolated)
//	                    or the Baseline tier's verdicts; accept                                                  (not isolated) }
//	  chain in/HOSTIF { ct state established,related accept; NDP, DHCP replies accept; ... saddr ...; drop }
//	}
//	table bridge netclass_pol {                 # per port, before the inet hooks
//	  map egress  { type ifname : verdict }     # host end -> goto eg/HOSTIF
//	  map ingress { type ifname : verdict }     # host end -> goto in/HOSTIF
//	  chain prerouting { type filter hook prerouting priority -250; iifname vmap @egress }
//	  chain forward    { type filter hook forward priority -250; oifname vmap @ingress }
//	  chain eg/HOSTIF  { ether type { arp, ip, ip6 } accept; drop }      # nothing but IP and ARP
//	  chain in/HOSTIF  { ether type arp accept; unicast IP accept (the inet table decides);
//	                     multicast/broadcast IP: NDP, MLD, IGMP, DHCP accept; [all of it when a policy allows all]; drop }
//	}
//
// Bridged IP reaches the inet hooks through br_netfilter, which the
// bridge must have on (nf_call_iptables, nf_call_ip6tables: the agent sets
// them, plugins/kernel/link.BridgeNetfilter); there the interfaces are the
// bridge's, so a pod is known by its MAC, which its guard (guard.go) makes
// its own. Traffic the node itself sends to a pod is not filtered (a pod is
// always reachable from its node, as NetworkPolicy says).
const HostPolicyTable = "netclass_pol"

// HostPolicyFeature names what the host side of NetworkPolicy needs.
const HostPolicyFeature = "nftables inet and bridge tables with concatenated verdict maps, and br_netfilter"

// HostPort is one pod port's policy: the bridge it is a port of, the pod's
// MAC and addresses (packets routed into the bridge are known by them), and
// the plan.
type HostPort struct {
	Bridge string
	MAC    net.HardwareAddr
	Addrs  []netip.Addr
	Plan   *netpol.Plan
	// Prev, when set, is the plan the port holds (its last sync's): its
	// chains and sets are then not read back from the kernel.
	Prev *netpol.Plan
}

var hostPolicyInet = func() *sharedTable {
	t := &nftables.Table{Name: HostPolicyTable, Family: nftables.TableFamilyINet}
	concat := func(name string, id uint32, key nftables.SetDatatype) *nftables.Set {
		return &nftables.Set{Table: t, Name: name, ID: id, IsMap: true, Concatenation: true,
			KeyType: nftables.MustConcatSetType(nftables.TypeIFName, key), DataType: nftables.TypeVerdict}
	}
	egress, ingress := concat("egress", 1, nftables.TypeEtherAddr), concat("ingress", 2, nftables.TypeEtherAddr)
	r4, r6 := concat("routed4", 3, nftables.TypeIPAddr), concat("routed6", 4, nftables.TypeIP6Addr)
	base := func(name string, hook *nftables.ChainHook) *nftables.Chain {
		return &nftables.Chain{Name: name, Table: t, Type: nftables.ChainTypeFilter, Hooknum: hook,
			Priority: nftables.ChainPriorityFilter, Policy: policyAccept()}
	}
	pre, fwd := base("prerouting", nftables.ChainHookPrerouting), base("forward", nftables.ChainHookForward)
	return &sharedTable{
		table: t, maps: []*nftables.Set{egress, ingress, r4, r6}, bases: []*nftables.Chain{pre, fwd},
		rules: map[string][][]expr.Any{
			pre.Name: {dispatchByIfnameMAC(true, "egress", 1)},
			fwd.Name: {dispatchByIfnameMAC(false, "ingress", 2), dispatchByOifnameAddr(false, "routed4", 3), dispatchByOifnameAddr(true, "routed6", 4)},
		},
		prefixes: []string{"eg/", "in/"}, feature: HostPolicyFeature,
	}
}()

var hostPolicyBridge = func() *sharedTable {
	t := &nftables.Table{Name: HostPolicyTable, Family: nftables.TableFamilyBridge}
	vmap := func(name string, id uint32) *nftables.Set {
		return &nftables.Set{Table: t, Name: name, ID: id, IsMap: true, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict}
	}
	prio := nftables.ChainPriority(-250)
	base := func(name string, hook *nftables.ChainHook) *nftables.Chain {
		return &nftables.Chain{Name: name, Table: t, Type: nftables.ChainTypeFilter, Hooknum: hook, Priority: &prio, Policy: policyAccept()}
	}
	pre, fwd := base("prerouting", nftables.ChainHookPrerouting), base("forward", nftables.ChainHookForward)
	return &sharedTable{
		table: t, maps: []*nftables.Set{vmap("egress", 1), vmap("ingress", 2)}, bases: []*nftables.Chain{pre, fwd},
		rules: map[string][][]expr.Any{
			pre.Name: {dispatchByIifname("egress", 1)},
			fwd.Name: {dispatchByOifname("ingress", 2)},
		},
		prefixes: []string{"eg/", "in/"}, feature: HostPolicyFeature,
	}
}()

// hostPolicyObjects renders one port's objects in both tables, their
// address sets' elements from cache (nil: rendered afresh).
func hostPolicyObjects(hostIf string, p HostPort, cache *elementCache) (inet, bridge *portObjects) {
	inet, bridge = hostPolicyInet.newPort(0), hostPolicyBridge.newPort(0)
	inet.rs.cache, bridge.rs.cache = cache, cache
	if p.Plan.IsZero() {
		return inet, bridge
	}
	egress, ingress := "eg/"+hostIf, "in/"+hostIf
	if p.Plan.Egress.Active() {
		inetChain(inet, egress, false, p.Plan.Egress)
		inet.elements["egress"] = []nftables.SetElement{macElement(p.Bridge, p.MAC, egress)}
	}
	if p.Plan.Egress.Isolated {
		bridgeEgress(bridge, egress)
		bridge.elements["egress"] = []nftables.SetElement{ifElement(hostIf, egress)}
	}
	if p.Plan.Ingress.Active() {
		inetChain(inet, ingress, true, p.Plan.Ingress)
		inet.elements["ingress"] = []nftables.SetElement{macElement(p.Bridge, p.MAC, ingress)}
		for _, a := range p.Addrs {
			m := "routed4"
			if a.Is6() {
				m = "routed6"
			}
			inet.elements[m] = append(inet.elements[m], nftables.SetElement{Key: ifnameKey(p.Bridge, a.AsSlice()), VerdictData: gotoVerdict(ingress)})
		}
	}
	if p.Plan.Ingress.Isolated {
		bridgeIngress(bridge, ingress, p.Plan.Ingress)
		bridge.elements["ingress"] = []nftables.SetElement{ifElement(hostIf, ingress)}
	}
	return inet, bridge
}

func gotoVerdict(chain string) *expr.Verdict {
	return &expr.Verdict{Kind: expr.VerdictGoto, Chain: chain}
}

func macElement(bridge string, mac net.HardwareAddr, chain string) nftables.SetElement {
	return nftables.SetElement{Key: ifnameKey(bridge, mac), VerdictData: gotoVerdict(chain)}
}

func ifElement(hostIf, chain string) nftables.SetElement {
	return nftables.SetElement{Key: ifname(hostIf), VerdictData: gotoVerdict(chain)}
}

// inetChain renders a direction's stateful chain.
func inetChain(p *portObjects, name string, ingress bool, d netpol.Direction) {
	p.rs.chains = append(p.rs.chains, &nftables.Chain{Name: name, Table: p.rs.table})
	dhcpSport, dhcpDport := uint16(68), uint16(67) // the pod's DHCP client asks
	if ingress {
		dhcpSport, dhcpDport = 67, 68 // and is answered
	}
	rules := [][]expr.Any{acceptEstablished(), acceptNDP(),
		concat(matchNFProto(false), matchL4proto(unix.IPPROTO_UDP), matchSport(dhcpSport), matchDport(dhcpDport), []expr.Any{verdict(expr.VerdictAccept)})}
	p.rs.rules[name] = append(rules, directionRules(p.rs, name, ingress, d)...)
}

// bridgeEgress: an egress-isolated pod sends nothing but IP and ARP.
func bridgeEgress(p *portObjects, name string) {
	p.rs.chains = append(p.rs.chains, &nftables.Chain{Name: name, Table: p.rs.table})
	var rules [][]expr.Any
	for _, t := range []uint16{unix.ETH_P_ARP, unix.ETH_P_IP, unix.ETH_P_IPV6} {
		rules = append(rules, concat(matchEtherType(t), []expr.Any{verdict(expr.VerdictAccept)}))
	}
	p.rs.rules[name] = append(rules, []expr.Any{verdict(expr.VerdictDrop)})
}

// bridgeIngress: an ingress-isolated pod receives ARP, unicast IP (which
// the inet table filters with conntrack), the multicast and broadcast IP
// the network's infrastructure needs (NDP, MLD, IGMP, DHCP replies), other
// multicast and broadcast IP only when a policy allows every peer on every
// port (the bridge has no conntrack here, and the allows' peers and ports
// would have to be held twice: they are not), and nothing else.
func bridgeIngress(p *portObjects, name string, d netpol.Direction) {
	p.rs.chains = append(p.rs.chains, &nftables.Chain{Name: name, Table: p.rs.table})
	ip4, ip6 := matchEtherType(unix.ETH_P_IP), matchEtherType(unix.ETH_P_IPV6)
	accept := []expr.Any{verdict(expr.VerdictAccept)}
	rules := [][]expr.Any{
		concat(matchEtherType(unix.ETH_P_ARP), accept),
		concat(ip4, matchUnicast(), accept),
		concat(ip6, matchUnicast(), accept),
		// MLD (130-132, 143) and NDP (133-137) only: any other ICMPv6 can
		// be sent to the pod's own address in a multicast frame.
		concat(ip6, matchL4proto(unix.IPPROTO_ICMPV6), matchICMPv6Types(mldFirst, ndpLast), accept),
		concat(ip6, matchL4proto(unix.IPPROTO_ICMPV6), matchICMPv6Types(mldv2Report, mldv2Report), accept),
		concat(ip4, matchL4proto(unix.IPPROTO_IGMP), accept),
		concat(ip4, matchL4proto(unix.IPPROTO_UDP), matchSport(67), matchDport(68), accept),
	}
	for _, a := range d.Allow {
		if v4, v6 := a.Families(); a.V4 == nil && a.V6 == nil && len(a.Ports) == 0 && v4 && v6 {
			rules = append(rules, concat(ip4, accept), concat(ip6, accept))
			break
		}
	}
	p.rs.rules[name] = append(rules, []expr.Any{verdict(expr.VerdictDrop)})
}

// portSets returns the port matches of an allow: one per protocol (a
// protocol given without ports matches all of them; no ports at all match
// every packet). A protocol's ports that merge into one range are matched
// in the rule itself (`th dport 80`, `th dport 30000-30100`), as most
// policies' are; others are in a set, the one of an earlier allow of the
// port listing the same ports if any. Every set is one more object the
// kernel finds by name in a list of the table's sets on each message that
// names it, so a set less per allow is a cheaper transaction for every
// port of the node (test/bench/README.md, "Sets per port").
func portSets(rs *ruleset, name string, ports []netpol.PortRange) [][]expr.Any {
	if len(ports) == 0 {
		return [][]expr.Any{nil}
	}
	byProto := map[uint8][]netpol.PortRange{}
	var protos []uint8
	for _, p := range ports {
		if _, seen := byProto[p.Proto]; !seen {
			protos = append(protos, p.Proto)
		}
		byProto[p.Proto] = append(byProto[p.Proto], p)
	}
	slices.Sort(protos)
	out := make([][]expr.Any, 0, len(protos))
	for _, proto := range protos {
		m := matchL4proto(proto)
		r := byProto[proto]
		switch merged := mergePorts(r); {
		case slices.ContainsFunc(r, func(p netpol.PortRange) bool { return p.From == 0 }):
		case len(merged) == 1:
			m = concat(m, matchDportRange(merged[0].From, merged[0].To))
		default:
			els := portIntervals(merged)
			s, h := rs.shared.find(rs.sets, nftables.TypeInetService, els) // an earlier allow's set of the same ports
			if s == nil {
				s = &nftables.Set{Table: rs.table, Name: fmt.Sprintf("%s_p%d", name, proto), KeyType: nftables.TypeInetService,
					Interval: true, ID: rs.setID()}
				rs.sets = rs.shared.add(rs.sets, h, setWithElements{set: s, elements: els})
			}
			m = concat(m, []expr.Any{
				&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID},
			})
		}
		out = append(out, m)
	}
	return out
}

// mergePorts sorts port ranges and merges those that overlap or touch.
func mergePorts(ranges []netpol.PortRange) []netpol.PortRange {
	sorted := slices.Clone(ranges)
	slices.SortFunc(sorted, func(a, b netpol.PortRange) int { return int(a.From) - int(b.From) })
	var merged []netpol.PortRange
	for _, r := range sorted {
		if n := len(merged); n > 0 && int(r.From) <= int(merged[n-1].To)+1 {
			merged[n-1].To = max(merged[n-1].To, r.To)
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// portIntervals encodes merged port ranges as an interval set's elements,
// the way nft does (a start element per range and an end one past it).
func portIntervals(merged []netpol.PortRange) []nftables.SetElement {
	var els []nftables.SetElement
	if merged[0].From != 0 {
		els = append(els, nftables.SetElement{Key: []byte{0, 0}, IntervalEnd: true})
	}
	for _, r := range merged {
		els = append(els, nftables.SetElement{Key: binary.BigEndian.AppendUint16(nil, r.From)})
		if r.To < 65535 {
			els = append(els, nftables.SetElement{Key: binary.BigEndian.AppendUint16(nil, r.To+1), IntervalEnd: true})
		}
	}
	return els
}

// SyncHostPolicies brings the ports' policies (a zero plan: none) to what
// they are to be, in place and in few transactions: the bridge table's
// part first, then the inet table's. Ports missing from the map are not
// touched, nor are those that hold no policy (Prev zero) and are to hold
// none: a sync of only such ports (a new port no policy selects) does
// not read the tables, whose size is the node's policies'.
func SyncHostPolicies(c *nftables.Conn, ports map[string]HostPort) map[string]PortResult {
	inet := make(map[string]*portObjects, len(ports))
	bridge := make(map[string]*portObjects, len(ports))
	prevInet, prevBridge := map[string]*portObjects{}, map[string]*portObjects{}
	cache := newElementCache()
	out := make(map[string]PortResult, len(ports))
	for h, p := range ports {
		if p.Plan.IsZero() && p.Prev != nil && p.Prev.IsZero() {
			out[h] = PortResult{}
			continue
		}
		inet[h], bridge[h] = hostPolicyObjects(h, p, cache)
		if p.Prev != nil {
			q := p
			q.Plan = p.Prev
			prevInet[h], prevBridge[h] = hostPolicyObjects(h, q, cache)
		}
	}
	if len(inet) == 0 {
		return out
	}
	maps.Copy(out, hostPolicyBridge.syncFrom(c, bridge, prevBridge))
	for h, r := range hostPolicyInet.syncFrom(c, inet, prevInet) {
		b := out[h]
		out[h] = PortResult{Changed: b.Changed || r.Changed, At: later(b.At, r.At), Err: joinErr(b.Err, r.Err)}
	}
	return out
}

// DeleteHostPolicy removes everything of the host end's policy; none is
// success. It needs only the host end's name.
func DeleteHostPolicy(c *nftables.Conn, hostIf string) error {
	if err := hostPolicyInet.sync(c, map[string]*portObjects{hostIf: nil})[hostIf].Err; err != nil {
		return err
	}
	return hostPolicyBridge.sync(c, map[string]*portObjects{hostIf: nil})[hostIf].Err
}

// CheckHostPolicy verifies the port holds exactly its policy.
func CheckHostPolicy(c *nftables.Conn, hostIf string, p HostPort) error {
	if p.Plan.IsZero() {
		for _, t := range []*sharedTable{hostPolicyInet, hostPolicyBridge} {
			st, err := t.read(c)
			if err != nil {
				return err
			}
			if st.has(hostIf) {
				return fmt.Errorf("nftables table %s holds a policy of port %q, the plan isolates nothing", t.table.Name, hostIf)
			}
		}
		return nil
	}
	inet, bridge := hostPolicyObjects(hostIf, p, nil)
	if err := hostPolicyInet.check(c, hostIf, inet); err != nil {
		return err
	}
	return hostPolicyBridge.check(c, hostIf, bridge)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func joinErr(a, b error) error {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return fmt.Errorf("%w; %w", a, b)
}
