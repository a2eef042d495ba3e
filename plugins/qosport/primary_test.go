package qosport

import (
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/test/nstest"
)

// primaryCNI is a pod's primary interface as a bridge-based primary CNI
// (upstream bridge, Flannel) makes it: eth0 in the pod, its veth's host end
// vethpod a port of cni0, next to a peer pod; the CNI's own objects on the
// host end: a root qdisc, an ingress qdisc whose filter redirects the pod's
// egress to an IFB (the bandwidth plugin's shaping), an nftables table of
// each family at the hooks netclass uses, and an iptables rule.
type primaryCNI struct {
	host, pod, peer *nstest.NS
}

func newPrimaryCNI(t *testing.T) *primaryCNI {
	c := &primaryCNI{host: nstest.New(t), pod: nstest.New(t), peer: nstest.New(t)}
	nstest.Veth(t, c.pod, "eth0", "10.99.0.2/24", c.host, "vethpod", "")
	nstest.Veth(t, c.peer, "eth0", "10.99.0.3/24", c.host, "vethpeer", "")
	c.host.Bridge(t, "cni0", "vethpod", "vethpeer")
	c.pod.Output(t, "ip", "-6", "addr", "add", "fd99::2/64", "dev", "eth0", "nodad")
	c.peer.Output(t, "ip", "-6", "addr", "add", "fd99::3/64", "dev", "eth0", "nodad")
	for _, cmd := range [][]string{
		{"tc", "qdisc", "add", "dev", "vethpod", "root", "handle", "1:", "tbf", "rate", "1gbit", "burst", "256kb", "latency", "50ms"},
		{"tc", "qdisc", "add", "dev", "vethpod", "ingress"},
		{"ip", "link", "add", "cnifb", "type", "ifb"},
		{"ip", "link", "set", "cnifb", "up"},
		{"tc", "qdisc", "add", "dev", "cnifb", "root", "tbf", "rate", "1gbit", "burst", "256kb", "latency", "50ms"},
		{"tc", "filter", "add", "dev", "vethpod", "parent", "ffff:", "protocol", "all", "prio", "1", "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", "cnifb"},
		{"nft", "add table inet cni_fake; add chain inet cni_fake fwdchain { type filter hook forward priority 0; }; add rule inet cni_fake fwdchain iifname vethpod counter accept"},
		{"nft", "add table bridge cni_fake_br; add chain bridge cni_fake_br prechain { type filter hook prerouting priority -200; }; add rule bridge cni_fake_br prechain iifname vethpod counter accept"},
		{"iptables", "-w", "-A", "FORWARD", "-i", "cni0", "-j", "ACCEPT"},
	} {
		c.host.Output(t, cmd[0], cmd[1:]...)
	}
	return c
}

// cniState is what the primary CNI owns on the host, counters left out
// (traffic moves them).
func (c *primaryCNI) cniState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, cmd := range [][]string{
		{"tc", "qdisc", "show", "dev", "vethpod"},
		{"tc", "qdisc", "show", "dev", "cnifb"},
		{"tc", "filter", "show", "dev", "vethpod", "ingress"},
		{"tc", "filter", "show", "dev", "vethpod", "root"},
		{"nft", "list", "table", "inet", "cni_fake"},
		{"nft", "list", "table", "bridge", "cni_fake_br"},
		{"iptables", "-w", "-S"},
	} {
		out := c.host.Output(t, cmd[0], cmd[1:]...)
		for _, line := range strings.Split(out, "\n") {
			if i := strings.Index(line, "counter packets"); i >= 0 {
				line = line[:i]
			}
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// sync brings the pod's eth0 to the plan, as the rule agent does.
func (c *primaryCNI) sync(t *testing.T, plan *qos.Plan) Result {
	t.Helper()
	var res []Result
	c.host.Do(t, func() error {
		res = SyncInterfaces([]Interface{{PodNS: c.pod.Path, IfName: "eth0", Plan: plan}})
		return nil
	})
	return res[0]
}

// dscpAtPeer sends UDP from the pod to the peer's address and returns the
// DSCP the peer receives it with.
func (c *primaryCNI) dscpAtPeer(t *testing.T, dst string) uint8 {
	t.Helper()
	return c.dscpFrom(t, dst, 0)
}

func primaryPlan(rules ...qos.Rule) *qos.Plan { return qos.Compile(&qos.Spec{Egress: rules}) }

func markAll(dscp int) qos.Rule { return qos.Rule{Priority: 20, DSCP: &dscp} }

func markTo(dscp int, cidr string, except ...string) qos.Rule {
	return qos.Rule{Priority: 40, DSCP: &dscp, Classifier: qos.Classifier{To: []qos.Peer{{IPBlock: &qos.IPBlock{CIDR: cidr, Except: except}}}}}
}

// NetworkQoS on a pod's primary interface next to a bridge-based primary
// CNI: the rules go to the veth's host end in netclass's own table (out of
// the pod's reach) and mark what the pod sends, IPv4 and IPv6, all traffic
// or by ipBlock with except; the CNI's qdiscs, filters, nftables tables
// and iptables rules are the same before, during and after, and its own
// hook at the same place still sees the traffic; an empty plan, and the
// removal of a gone pod's port, leave nothing of netclass's.
func TestPrimaryInterfaceNextToABridgeCNI(t *testing.T) {
	c := newPrimaryCNI(t)
	before := c.cniState(t)
	if r := c.sync(t, primaryPlan(markAll(20))); r.Err != nil || !r.Changed {
		t.Fatalf("all traffic: %+v", r)
	}
	for _, dst := range []string{"10.99.0.3", "fd99::3"} {
		if got := c.dscpAtPeer(t, dst); got != 20 {
			t.Errorf("all traffic: to %s the peer sees DSCP %d, want 20", dst, got)
		}
	}
	if has, err := podHasPrimaryRules(c.pod); err != nil || has {
		t.Errorf("the pod holds netclass rules for eth0 (%v, %v): they belong on the host end", has, err)
	}
	story3 := primaryPlan(markTo(11, "10.99.0.0/16", "10.99.0.3/32"), markTo(48, "fd99::/64", "fd99::4/126"))
	if r := c.sync(t, story3); r.Err != nil || !r.Changed {
		t.Fatalf("ipBlocks with except: %+v", r)
	}
	for dst, want := range map[string]uint8{"10.99.0.3": 0, "fd99::3": 48} {
		if got := c.dscpAtPeer(t, dst); got != want {
			t.Errorf("ipBlocks with except: to %s the peer sees DSCP %d, want %d", dst, got, want)
		}
	}
	if strings.Contains(c.host.Output(t, "nft", "list", "table", "bridge", "cni_fake_br"), "counter packets 0 bytes") {
		t.Error("the CNI's own rule at bridge prerouting saw none of the pod's traffic")
	}
	if after := c.cniState(t); after != before {
		t.Errorf("the primary CNI's state changed with the rules in place:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if r := c.sync(t, primaryPlan()); r.Err != nil || !r.Changed {
		t.Fatalf("empty plan: %+v", r)
	}
	if got := c.dscpAtPeer(t, "fd99::3"); got != 0 {
		t.Errorf("after the rules went the peer sees DSCP %d", got)
	}
	c.noPort(t, "after an empty plan")
	if after := c.cniState(t); after != before {
		t.Errorf("the primary CNI's state changed when the rules went:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	c.sync(t, primaryPlan(markAll(20)))
	c.pod.Output(t, "ip", "link", "del", "eth0") // the pod goes (its CNI DEL)
	c.host.Do(t, func() error { return RemovePortRules("vethpod") })
	c.noPort(t, "after the pod went")
}

// noPort checks the host holds nothing of netclass's for the host end.
func (c *primaryCNI) noPort(t *testing.T, when string) {
	t.Helper()
	if rs := c.host.Ruleset(t); strings.Contains(rs, nft.PortChain("vethpod")) || strings.Contains(rs, `"vethpod" : goto`) {
		t.Errorf("%s the host still holds rules of vethpod:\n%s", when, rs)
	}
}

func podHasPrimaryRules(pod *nstest.NS) (bool, error) {
	var has bool
	err := nft.InNamespace(pod.Path, func(c *nftables.Conn) error {
		var err error
		has, err = nft.HasAnyPodQoS(c, "eth0")
		return err
	})
	return has, err
}

// syncRouted brings the pod's eth0 to the plan as the rule agent does for
// the primary interface (HostIngress).
func (c *primaryCNI) syncRouted(t *testing.T, plan *qos.Plan) Result {
	t.Helper()
	var res []Result
	c.host.Do(t, func() error {
		res = SyncInterfaces([]Interface{{PodNS: c.pod.Path, IfName: "eth0", Plan: plan, HostIngress: true}})
		return nil
	})
	return res[0]
}

// dscpRouted sends UDP from the pod to the peer behind the host (the
// host routes it) and returns the DSCP the peer receives it with: what
// leaves the host, past the host end's ingress hook (a capture on the host
// end would see the packet before the hook).
func (c *primaryCNI) dscpRouted(t *testing.T) uint8 {
	t.Helper()
	return c.dscpAtPeer(t, "10.98.0.2")
}

// A routed primary CNI (upstream ptp, Calico: the host end in no bridge)
// has no switch port: the primary interface's rules go to the host end's
// netfilter ingress hook, in a table of netclass's own, out of the pod's
// reach (a pod with CAP_NET_ADMIN that flushes its whole ruleset and its
// qdiscs keeps its marking); a table an earlier sync left in the pod goes;
// when the CNI hooks the host end's ingress in tc (which may redirect
// packets past that hook), the rules go to the pod's egress hook instead;
// an empty plan and the removal of a gone pod's port leave nothing.
func TestPrimaryInterfaceNextToARoutedCNI(t *testing.T) {
	host, pod, peer := nstest.New(t), nstest.New(t), nstest.New(t)
	nstest.Veth(t, pod, "eth0", "10.99.0.2/24", host, "vethpod", "10.99.0.1/24")
	nstest.Veth(t, peer, "eth0", "10.98.0.2/24", host, "vethpeer", "10.98.0.1/24")
	pod.Output(t, "ip", "route", "add", "10.98.0.0/24", "via", "10.99.0.1")
	peer.Output(t, "ip", "route", "add", "10.99.0.0/24", "via", "10.98.0.1")
	host.Output(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	c := &primaryCNI{host: host, pod: pod, peer: peer}
	if r := c.sync(t, primaryPlan(markAll(10))); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := c.syncRouted(t, primaryPlan(markAll(26))); r.Err != nil || !r.Changed {
		t.Fatalf("all traffic: %+v", r)
	}
	if has, err := podHasPrimaryRules(pod); err != nil || has {
		t.Errorf("the pod still holds a table for eth0 (%v, %v): the rules belong on the host end", has, err)
	}
	pod.Output(t, "nft", "flush", "ruleset")
	pod.Output(t, "sh", "-c", "tc qdisc del dev eth0 root 2>/dev/null; tc qdisc add dev eth0 root pfifo")
	c.checkHostTable(t, true)
	if got := c.dscpRouted(t); got != 26 {
		t.Errorf("after the pod flushed what it sees, the host receives DSCP %d, want 26", got)
	}
	host.Output(t, "tc", "qdisc", "add", "dev", "vethpod", "ingress")
	if r := c.syncRouted(t, primaryPlan(markAll(26))); r.Err != nil || !r.Changed {
		t.Fatalf("with a tc ingress hook on the host end: %+v", r)
	}
	if has, err := podHasPrimaryRules(pod); err != nil || !has {
		t.Errorf("with a tc ingress hook on the host end, the rules are not in the pod: %v, %v", has, err)
	}
	c.checkHostTable(t, false)
	host.Output(t, "tc", "qdisc", "del", "dev", "vethpod", "ingress")
	if r := c.syncRouted(t, primaryPlan()); r.Err != nil || !r.Changed {
		t.Fatalf("empty plan: %+v", r)
	}
	if has, err := podHasPrimaryRules(pod); err != nil || has {
		t.Errorf("after an empty plan the pod still holds rules: %v, %v", has, err)
	}
	c.syncRouted(t, primaryPlan(markAll(26)))
	pod.Output(t, "ip", "link", "del", "eth0")
	host.Do(t, func() error { return RemovePortRules("vethpod") })
	c.checkHostTable(t, false)
}

// checkHostTable checks whether the host holds the host end's table.
func (c *primaryCNI) checkHostTable(t *testing.T, want bool) {
	t.Helper()
	if got := strings.Contains(c.host.Ruleset(t), "table netdev "+nft.HostIngressTable("vethpod")); got != want {
		t.Errorf("the host holds table netdev %s: %v, want %v", nft.HostIngressTable("vethpod"), got, want)
	}
}

// The rules of host ends that are gone (their pods deleted while the agent
// was down) are found and removed, in the shared table and in the host
// ends' own tables; a live host end's stay.
func TestRemoveStaleHostRules(t *testing.T) {
	host := nstest.New(t)
	host.Bridge(t, "br0")
	var ifs []Interface
	for _, h := range []string{"hA", "hB", "hC"} {
		pod := nstest.New(t)
		nstest.Veth(t, pod, "eth0", "", host, h, "")
		if h != "hB" {
			host.Bridge(t, "br0", h)
		}
		ifs = append(ifs, Interface{PodNS: pod.Path, IfName: "eth0", Plan: primaryPlan(markAll(20)), HostIngress: true})
	}
	var res []Result
	host.Do(t, func() error { res = SyncInterfaces(ifs); return nil })
	for i, r := range res {
		if r.Err != nil || !r.Changed {
			t.Fatalf("interface %d: %+v", i, r)
		}
	}
	host.Output(t, "ip", "link", "del", "hA")
	host.Output(t, "ip", "link", "del", "hB")
	var stale []string
	host.Do(t, func() error {
		var err error
		stale, err = RemoveStaleHostRules()
		return err
	})
	if strings.Join(stale, " ") != "hA hB" {
		t.Errorf("stale host ends %v, want [hA hB]", stale)
	}
	rs := host.Ruleset(t)
	if strings.Contains(rs, nft.PortChain("hA")) || strings.Contains(rs, nft.HostIngressTable("hB")) || !strings.Contains(rs, nft.PortChain("hC")+" {") {
		t.Errorf("after the removal the host holds:\n%s", rs)
	}
}
