package vxlan

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// underlay is two nodes joined by a veth, over IPv4 or IPv6.
type underlay struct {
	name       string
	addr, peer [2]string // node addresses and the other's
	prefix     string
}

var underlays = []underlay{
	{"IPv4 underlay", [2]string{"10.51.0.1", "10.51.0.2"}, [2]string{"10.51.0.2", "10.51.0.1"}, "/24"},
	{"IPv6 underlay", [2]string{"fd51::1", "fd51::2"}, [2]string{"fd51::2", "fd51::1"}, "/64"},
}

func (u underlay) nodes(t *testing.T) (*node, *node) {
	t.Helper()
	a := &node{Host: cnitest.NewHost(t), addr: u.addr[0], dataDir: t.TempDir(), ipamDir: t.TempDir()}
	b := &node{Host: cnitest.NewHost(t), addr: u.addr[1], dataDir: t.TempDir(), ipamDir: t.TempDir()}
	nstest.Veth(t, a.NS, "under0", u.addr[0]+u.prefix, b.NS, "under0", u.addr[1]+u.prefix)
	return a, b
}

// dualStack renders a dual-stack VXLAN network for node i of u: addresses
// .first to .first+9 of 10.68.0.0/24 and fd68::/64.
func (u underlay) dualStack(t *testing.T, n *node, i, vni, first int, qos map[string]any) []byte {
	t.Helper()
	rng := func(subnet, start, end string) []any {
		return []any{map[string]any{"subnet": subnet, "rangeStart": start, "rangeEnd": end}}
	}
	c := map[string]any{
		"cniVersion": "1.1.0", "name": "blue", "type": plugin, "vni": vni, "master": "under0",
		"remotes": []string{u.peer[i]}, "dataDir": n.dataDir,
		"ipam": map[string]any{"type": "host-local", "dataDir": n.ipamDir, "ranges": []any{
			rng("10.68.0.0/24", fmt.Sprintf("10.68.0.%d", first), fmt.Sprintf("10.68.0.%d", first+9)),
			rng("fd68::/64", fmt.Sprintf("fd68::%d", first), fmt.Sprintf("fd68::%d", first+9)),
		}},
	}
	if qos != nil {
		c["qos"] = qos
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTheFabricSeesTheDSCP: over an IPv4 and an IPv6 underlay, what a pod
// sends crosses the underlay with the DSCP it has entering the tunnel in
// the outer header: the attachment's dscp (IPv4 and IPv6 pod packets), a
// NetworkQoS rule's (qos.egress), what the pod set itself where nothing
// overrides it, and 0 where nothing marks;
// the outer ECN field is the inner one, CE included (RFC 6040's normal
// mode). CHECK sees the tunnel's TOS setting.
func TestTheFabricSeesTheDSCP(t *testing.T) {
	for _, u := range underlays {
		t.Run(u.name, func(t *testing.T) {
			a, b := u.nodes(t)
			marked, plain, remote := cnitest.NewPod(t), cnitest.NewPod(t), cnitest.NewPod(t)
			markedConf := u.dualStack(t, a, 0, 700, 10, map[string]any{"dscp": 46, "egress": []any{map[string]any{
				"priority": 1, "dscp": 18, "classifier": map[string]any{"ports": []any{map[string]any{"protocol": "UDP", "port": 7007}, map[string]any{"protocol": "UDP", "port": 7008}}}}}})
			rm := a.Add(t, plugin, markedConf, marked, "net1")
			a.Add(t, plugin, u.dualStack(t, a, 0, 700, 20, nil), plain, "net1")
			rr := b.Add(t, plugin, u.dualStack(t, b, 1, 700, 30, nil), remote, "net1")
			for _, v6 := range []bool{false, true} { // neighbours resolved before the datagrams
				for _, p := range []*cnitest.Pod{marked, plain} {
					if err := traffic.Ping(p.NS, cnitest.Addr(t, rr, v6), 10*time.Second); err != nil {
						t.Fatal(err)
					}
				}
			}
			sniff, err := traffic.Sniff(b.NS, "under0")
			if err != nil {
				t.Fatal(err)
			}
			defer sniff.Close()
			for _, tc := range []struct {
				what      string
				from      *cnitest.Pod
				v6        bool
				port      uint16
				tos       uint8 // what the pod sets: DSCP << 2 | ECN
				dscp, ecn uint8 // what the inner and the outer header must carry
			}{
				{"attachment dscp 46, IPv4 pod packet, ECT(0)", marked, false, 7001, 0x02, 46, 2},
				{"attachment dscp 46 over the pod's own 10, IPv6 pod packet, ECT(1)", marked, true, 7002, 10<<2 | 1, 46, 1},
				{"nothing marks", plain, false, 7003, 0, 0, 0},
				{"nothing marks, IPv6", plain, true, 7004, 0, 0, 0},
				{"the pod's own dscp 10 where nothing overrides it", plain, false, 7005, 10 << 2, 10, 0},
				{"the pod's own dscp 34, IPv6, ECT(0)", plain, true, 7006, 34<<2 | 2, 34, 2},
				{"a NetworkQoS rule on UDP/7007: 18 over the attachment's 46", marked, false, 7007, 0, 18, 0},
				{"the same rule on UDP/7008, IPv6", marked, true, 7008, 0x02, 18, 2},
				{"CE (congestion met before the tunnel) stays CE outside", plain, false, 7009, 10<<2 | 3, 10, 3},
				{"CE, IPv6", marked, true, 7010, 3, 46, 3},
			} {
				dst := cnitest.Addr(t, rr, tc.v6)
				got := tunnelled(t, sniff, tc.from, dst, tc.port, tc.tos)
				if len(got) == 0 {
					t.Errorf("%s: no encapsulated datagram to port %d on the underlay", tc.what, tc.port)
					continue
				}
				for _, p := range got {
					in := p.Inner
					if p.Dst.Is6() != strings.Contains(u.addr[0], ":") || p.VNI != 700 || in.Dst != dst {
						t.Errorf("%s: captured %+v carrying %+v, want VNI 700 over the %s to %s", tc.what, p, in, u.name, dst)
					}
					if in.DSCP != tc.dscp || p.DSCP != tc.dscp || in.ECN != tc.ecn || p.ECN != tc.ecn {
						t.Errorf("%s: outer DSCP %d ECN %d, inner DSCP %d ECN %d; want both DSCP %d ECN %d",
							tc.what, p.DSCP, p.ECN, in.DSCP, in.ECN, tc.dscp, tc.ecn)
					}
				}
			}
			if err := a.Check(t, plugin, markedConf, rm, marked, "net1"); err != nil {
				t.Errorf("CHECK: %v", err)
			}
			ipIn(t, a.NS, "link", "set", "ncvx700", "type", "vxlan", "tos", "0")
			if err := a.Check(t, plugin, markedConf, rm, marked, "net1"); err == nil || !strings.Contains(err.Error(), "has tos 0x00, want inherit") {
				t.Errorf("CHECK with the tunnel's TOS cleared: %v, want an error naming the TOS", err)
			}
		})
	}
}

func ipIn(t *testing.T, ns *nstest.NS, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", append([]string{"-n", ns.Name}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestAnOlderTunnelGetsItsTOSInPlace: a VNI's VXLAN device made by an
// older netclass (no TOS setting) is brought to `tos inherit` by the next
// ADD on the node, in place: the same device, up throughout, and a pod's
// stream through it loses nothing while the outer DSCP goes from 0 to the
// attachment's.
func TestAnOlderTunnelGetsItsTOSInPlace(t *testing.T) {
	u := underlays[0]
	a, b := u.nodes(t)
	sender, other, remote := cnitest.NewPod(t), cnitest.NewPod(t), cnitest.NewPod(t)
	a.Add(t, plugin, u.dualStack(t, a, 0, 710, 10, map[string]any{"dscp": 46}), sender, "net1")
	rr := b.Add(t, plugin, u.dualStack(t, b, 1, 710, 30, nil), remote, "net1")
	dst := cnitest.Addr(t, rr, false)
	if err := traffic.Ping(sender.NS, dst, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ipIn(t, a.NS, "link", "set", "ncvx710", "type", "vxlan", "tos", "0") // as an older netclass made it
	index := a.NS.Link(t, "ncvx710").Attrs().Index
	sniff, err := traffic.Sniff(b.NS, "under0")
	if err != nil {
		t.Fatal(err)
	}
	defer sniff.Close()
	const n, port = 400, 7100
	sent := make(chan error, 1)
	go func() { sent <- traffic.SendUDP(sender.NS, dst, port, 0, n, 5*time.Millisecond) }()
	ours := func(p traffic.Packet) bool { return p.Inner != nil && p.Inner.DstPort == port }
	if got := sniff.WaitFor(ours, 50, 5*time.Second); len(got) < 50 {
		t.Fatalf("the stream did not start: %d datagrams", len(got))
	}
	a.Add(t, plugin, u.dualStack(t, a, 0, 710, 20, nil), other, "net1") // the upgraded plugin's ADD
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	got := sniff.WaitFor(ours, n, 5*time.Second)
	if len(got) != n {
		t.Errorf("%d of %d datagrams crossed the underlay while the TOS changed", len(got), n)
	}
	if len(got) > 0 && (got[0].DSCP != 0 || got[len(got)-1].DSCP != 46) {
		t.Errorf("outer DSCP went from %d to %d, want 0 (before) to 46 (after)", got[0].DSCP, got[len(got)-1].DSCP)
	}
	if l := a.NS.Link(t, "ncvx710"); l.Attrs().Index != index {
		t.Errorf("the VXLAN device was made again (index %d, was %d)", l.Attrs().Index, index)
	}
	out, _ := exec.Command("ip", "-n", a.NS.Name, "-d", "link", "show", "ncvx710").CombinedOutput()
	if !strings.Contains(string(out), "tos inherit") {
		t.Errorf("after the ADD the device has no `tos inherit`:\n%s", out)
	}
}

// TestTheFabricSeesThePolicysDSCP: under an admin's dscpPolicy, a pod's
// own EF (left out) crosses the underlay re-marked in the outer header as
// well as the inner one, its ECN bits untouched; an allowed value passes.
func TestTheFabricSeesThePolicysDSCP(t *testing.T) {
	u := underlays[0]
	a, b := u.nodes(t)
	pod, remote := cnitest.NewPod(t), cnitest.NewPod(t)
	policy := map[string]any{"allowed": []any{map[string]any{"first": 0, "last": 40}}, "remark": 8}
	a.Add(t, plugin, cnitest.WithField(t, u.dualStack(t, a, 0, 701, 10, nil), "dscpPolicy", policy), pod, "net1")
	rr := b.Add(t, plugin, u.dualStack(t, b, 1, 701, 30, nil), remote, "net1")
	dst := cnitest.Addr(t, rr, false)
	if err := traffic.Ping(pod.NS, dst, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	sniff, err := traffic.Sniff(b.NS, "under0")
	if err != nil {
		t.Fatal(err)
	}
	defer sniff.Close()
	for _, tc := range []struct {
		port      uint16
		tos       uint8
		dscp, ecn uint8
	}{{7101, 46<<2 | 2, 8, 2}, {7102, 34<<2 | 1, 34, 1}} {
		got := tunnelled(t, sniff, pod, dst, tc.port, tc.tos)
		if len(got) == 0 {
			t.Fatalf("no encapsulated datagram to port %d on the underlay", tc.port)
		}
		if p := got[0]; p.DSCP != tc.dscp || p.Inner.DSCP != tc.dscp || p.ECN != tc.ecn || p.Inner.ECN != tc.ecn {
			t.Errorf("the pod sends TOS %#x: outer DSCP %d ECN %d, inner DSCP %d ECN %d; want DSCP %d ECN %d",
				tc.tos, p.DSCP, p.ECN, p.Inner.DSCP, p.Inner.ECN, tc.dscp, tc.ecn)
		}
	}
}

// tunnelled sends three datagrams with tos from the pod to dst:port and
// returns the encapsulated ones the underlay capture sees.
func tunnelled(t *testing.T, sniff *traffic.Sniffer, from *cnitest.Pod, dst netip.Addr, port uint16, tos uint8) []traffic.Packet {
	t.Helper()
	if err := traffic.SendUDP(from.NS, dst, port, tos, 3, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return sniff.WaitFor(func(p traffic.Packet) bool { return p.Inner != nil && p.Inner.DstPort == port }, 3, 3*time.Second)
}
