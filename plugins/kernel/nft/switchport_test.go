package nft

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/rawframe"
)

// switchBed is a host namespace with a bridge whose ports are pods' veths,
// as netclass-bridge makes them: the pods' interfaces are eth0, the host
// ends p<name>. The bridge hands its IP traffic to the inet hooks while
// the namespace-wide sysctls say no, as BridgeNetfilter promises.
type switchBed struct {
	host *nstest.NS
	pods map[string]*swPod
}

type swPod struct {
	ns     *nstest.NS
	hostIf string
	mac    net.HardwareAddr
	ip     netip.Addr
	ll     netip.Addr
}

func newSwitchBed(t *testing.T, names ...string) *switchBed {
	b := &switchBed{host: nstest.New(t), pods: map[string]*swPod{}}
	b.host.Do(t, func() error {
		if err := link.LoadBridgeNetfilter(); err != nil { // a module on a distribution's kernel
			return err
		}
		for _, s := range []string{"bridge-nf-call-iptables", "bridge-nf-call-ip6tables"} {
			if err := writeSysctl("/proc/sys/net/bridge/"+s, "0"); err != nil {
				return err
			}
		}
		return nil
	})
	for i, n := range names {
		p := &swPod{ns: nstest.New(t), hostIf: "p" + n, ip: netip.MustParseAddr(fmt.Sprintf("10.7.0.%d", i+1))}
		nstest.Veth(t, b.host, p.hostIf, "", p.ns, "eth0", p.ip.String()+"/24")
		b.host.Bridge(t, "br0", p.hostIf)
		p.mac = p.ns.Link(t, "eth0").Attrs().HardwareAddr
		p.ll = p.ns.LinkLocal(t, "eth0")
		b.pods[n] = p
	}
	b.host.Do(t, func() error {
		br, err := link.ByName("br0")
		if err != nil {
			return err
		}
		return link.BridgeNetfilter(br)
	})
	return b
}

// conn runs fn with a connection to the host's nftables.
func (b *switchBed) nft(t *testing.T, fn func(c *nftables.Conn) error) {
	t.Helper()
	if err := InNamespace(b.host.Path, fn); err != nil {
		t.Fatal(err)
	}
}

func (b *switchBed) guard(t *testing.T, closed bool, names ...string) {
	t.Helper()
	b.nft(t, func(c *nftables.Conn) error {
		for _, n := range names {
			p := b.pods[n]
			if err := InstallGuard(c, p.hostIf, Guard{MAC: p.mac, CheckIPs: true, V4: []netip.Addr{p.ip}, V6: []netip.Addr{p.ll}}, closed); err != nil {
				return err
			}
		}
		return nil
	})
}

// udpArrives sends a datagram from one pod to another, through the pod's
// socket or as a hand-built frame (raw, with the given source MAC and
// address), and reports whether it reached the receiver's interface.
func (b *switchBed) udpArrives(t *testing.T, from, to string, raw bool, srcMAC net.HardwareAddr, src netip.Addr) bool {
	t.Helper()
	sender, receiver := b.pods[from], b.pods[to]
	marker := []byte(fmt.Sprintf("netclass-%d", time.Now().UnixNano()))
	var capture *rawframe.Capture
	receiver.ns.Do(t, func() (err error) { capture, err = rawframe.Listen("eth0"); return err })
	defer capture.Close()
	if !raw {
		// each datagram resolves its receiver afresh: an entry left
		// unresolved while a port was closed would hold it until the next
		// ARP retransmission, up to a second later
		sender.ns.Output(t, "ip", "neigh", "flush", "all")
	}
	sender.ns.Do(t, func() error {
		if !raw {
			c, err := net.Dial("udp", netip.AddrPortFrom(receiver.ip, 9999).String())
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write(marker)
			return err
		}
		payload, typ := rawframe.UDP(netip.AddrPortFrom(src, 5555), netip.AddrPortFrom(receiver.ip, 9999), marker)
		return rawframe.Send("eth0", rawframe.Frame{Src: srcMAC, Dst: receiver.mac, Type: typ, Payload: payload})
	})
	got, err := capture.Wait(marker, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestGuardDropsSpoofedFrames(t *testing.T) {
	b := newSwitchBed(t, "a", "b", "c")
	a, c := b.pods["a"], b.pods["c"]
	b.guard(t, false, "a", "b", "c")
	// the neighbours' ARP caches know each other, so the pods' own datagrams need no ARP
	for _, tc := range []struct {
		name   string
		raw    bool
		mac    net.HardwareAddr
		src    netip.Addr
		arrive bool
	}{
		{"socket", false, nil, netip.Addr{}, true},
		{"raw frame, own MAC and address", true, a.mac, a.ip, true},
		{"raw frame, a neighbour's address", true, a.mac, c.ip, false},
		{"raw frame, a foreign address", true, a.mac, netip.MustParseAddr("10.7.0.200"), false},
		{"raw frame, a neighbour's MAC and address", true, c.mac, c.ip, false},
		{"raw frame, a made-up MAC", true, net.HardwareAddr{2, 0, 0, 0, 0, 9}, a.ip, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := b.udpArrives(t, "a", "b", tc.raw, tc.mac, tc.src); got != tc.arrive {
				t.Errorf("datagram arrived: %v, want %v", got, tc.arrive)
			}
		})
	}
}

func TestGuardDropsRouterAdvertisements(t *testing.T) {
	b := newSwitchBed(t, "a", "b")
	a, bb := b.pods["a"], b.pods["b"]
	ra := rawframe.Frame{Src: a.mac, Dst: net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, Type: rawframe.EtherIPv6, Payload: rawframe.RouterAdvertisement(a.ll)}
	arrives := func() bool {
		var capture *rawframe.Capture
		bb.ns.Do(t, func() (err error) { capture, err = rawframe.Listen("eth0"); return err })
		defer capture.Close()
		a.ns.Do(t, func() error { return rawframe.Send("eth0", ra) })
		got, err := capture.Wait(ra.Payload[40:56], 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if !arrives() {
		t.Fatal("without a guard the router advertisement did not arrive: the test proves nothing")
	}
	b.guard(t, false, "a", "b")
	if arrives() {
		t.Error("a pod's router advertisement crossed its guarded port")
	}
}

func TestClosedPortPassesNothingUntilOpened(t *testing.T) {
	b := newSwitchBed(t, "a", "b")
	b.guard(t, true, "a")
	a := b.pods["a"]
	if b.udpArrives(t, "a", "b", false, nil, netip.Addr{}) || b.udpArrives(t, "b", "a", false, nil, netip.Addr{}) {
		t.Fatal("a closed port passed a datagram")
	}
	b.nft(t, func(c *nftables.Conn) error { return OpenGuard(c, a.hostIf) })
	if !b.udpArrives(t, "a", "b", false, nil, netip.Addr{}) || !b.udpArrives(t, "b", "a", false, nil, netip.Addr{}) {
		t.Fatal("an opened port passed nothing")
	}
	b.nft(t, func(c *nftables.Conn) error {
		if err := CheckGuard(c, a.hostIf, Guard{MAC: a.mac, CheckIPs: true, V4: []netip.Addr{a.ip}, V6: []netip.Addr{a.ll}}); err != nil {
			return err
		}
		if err := DeleteGuard(c, a.hostIf); err != nil {
			return err
		}
		if ok, err := HasGuard(c, a.hostIf); err != nil || ok {
			return fmt.Errorf("after DeleteGuard: guard left %v, %v", ok, err)
		}
		return DeleteGuard(c, a.hostIf) // none is success
	})
}

func hostRanges(addrs ...netip.Addr) []qos.Range {
	var out []qos.Range
	for _, a := range addrs {
		out = append(out, qos.Range{From: a, To: a})
	}
	return out
}

func (b *switchBed) policy(t *testing.T, plans map[string]*netpol.Plan) {
	t.Helper()
	ports := map[string]HostPort{}
	for n, plan := range plans {
		p := b.pods[n]
		ports[p.hostIf] = HostPort{Bridge: "br0", MAC: p.mac, Addrs: []netip.Addr{p.ip}, Plan: plan}
	}
	b.nft(t, func(c *nftables.Conn) error {
		for h, r := range SyncHostPolicies(c, ports) {
			if r.Err != nil {
				return fmt.Errorf("port %s: %w", h, r.Err)
			}
		}
		for h, p := range ports {
			if err := CheckHostPolicy(c, h, p); err != nil {
				return err
			}
		}
		return nil
	})
}

func (b *switchBed) tcp(t *testing.T, from, to string, port int) bool {
	t.Helper()
	return connects(t, b.pods[from].ns, b.pods[to].ip.String(), port)
}

func TestHostPolicy(t *testing.T) {
	b := newSwitchBed(t, "a", "b", "c")
	a, bb, c := b.pods["a"], b.pods["b"], b.pods["c"]
	b.guard(t, false, "a", "b", "c")
	for _, n := range []string{"a", "b", "c"} {
		for _, port := range []int{80, 81} {
			listen(t, b.pods[n].ns, b.pods[n].ip.String(), port)
		}
	}
	// b: ingress from a on TCP 80 only; egress nothing (replies only)
	b.policy(t, map[string]*netpol.Plan{"b": {
		Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{{V4: hostRanges(a.ip), V6: []qos.Range{}, Ports: []netpol.PortRange{{Proto: 6, From: 80, To: 80}}}}},
		Egress:  netpol.Direction{Isolated: true},
	}})
	for _, tc := range []struct {
		from, to string
		port     int
		open     bool
	}{
		{"a", "b", 80, true}, {"a", "b", 81, false}, {"c", "b", 80, false},
		{"b", "a", 80, false}, {"b", "c", 81, false}, {"a", "c", 80, true}, {"c", "a", 81, true},
	} {
		if got := b.tcp(t, tc.from, tc.to, tc.port); got != tc.open {
			t.Errorf("%s -> %s TCP/%d open: %v, want %v", tc.from, tc.to, tc.port, got, tc.open)
		}
	}
	// b's egress deny holds for frames b builds itself with its own addresses
	if b.udpArrives(t, "b", "c", true, bb.mac, bb.ip) {
		t.Error("a raw frame escaped b's egress policy")
	}
	// a non-IP frame from b, and a broadcast to b from c
	if frameArrives(t, bb, c, rawframe.Frame{Src: bb.mac, Dst: c.mac, Type: rawframe.EtherExperimental, Payload: []byte("netclass-nonip")}) {
		t.Error("a non-IP frame left an egress-isolated port")
	}
	bcast, typ := rawframe.UDP(netip.AddrPortFrom(c.ip, 5555), netip.AddrPortFrom(netip.MustParseAddr("10.7.0.255"), 9999), []byte("netclass-bcast"))
	if frameArrives(t, c, bb, rawframe.Frame{Src: c.mac, Dst: rawframe.Broadcast(), Type: typ, Payload: bcast}) {
		t.Error("a broadcast from a peer the policy does not allow reached an ingress-isolated port")
	}
	// lifting the policy opens b again and leaves nothing of it
	b.policy(t, map[string]*netpol.Plan{"b": {}})
	if !b.tcp(t, "c", "b", 81) || !b.tcp(t, "b", "c", 81) {
		t.Error("b is still isolated after its policy went")
	}
	b.nft(t, func(conn *nftables.Conn) error {
		for _, fam := range []nftables.TableFamily{nftables.TableFamilyINet, nftables.TableFamilyBridge} {
			chains, err := conn.ListChainsOfTableFamily(fam)
			if err != nil {
				return err
			}
			for _, ch := range chains {
				if ch.Table.Name == HostPolicyTable && strings.Contains(ch.Name, bb.hostIf) {
					return fmt.Errorf("chain %s of %s is left", ch.Name, bb.hostIf)
				}
			}
		}
		return nil
	})
}

// frameArrives sends a frame from one pod and reports whether the other's
// interface received it.
func frameArrives(t *testing.T, from, to *swPod, f rawframe.Frame) bool {
	t.Helper()
	var capture *rawframe.Capture
	to.ns.Do(t, func() (err error) { capture, err = rawframe.Listen("eth0"); return err })
	defer capture.Close()
	from.ns.Do(t, func() error { return rawframe.Send("eth0", f) })
	got, err := capture.Wait(f.Payload[len(f.Payload)-8:], 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func writeSysctl(path, v string) error { return os.WriteFile(path, []byte(v), 0o644) }

// Editing a policy swaps the ranges of its port and peer sets element by
// element: several intervals go and come in one transaction (deleted in
// the kernel's dump order, highest first, that transaction failed).
func TestHostPolicySetsEditedInPlace(t *testing.T) {
	host := nstest.New(t)
	host.Bridge(t, "br0")
	plan := func(last byte, ports ...uint16) *netpol.Plan {
		return tcpPlan(hostRanges(netip.AddrFrom4([4]byte{10, 0, 0, last}), netip.AddrFrom4([4]byte{10, 0, 0, last + 2})), ports...)
	}
	port := func(p *netpol.Plan) HostPort {
		return HostPort{Bridge: "br0", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.9")}, Plan: p}
	}
	for i, p := range []*netpol.Plan{plan(1, 80, 82), plan(2, 81, 83, 85), plan(20, 1000, 1002, 1004), plan(1, 80)} {
		err := InNamespace(host.Path, func(c *nftables.Conn) error {
			if r := SyncHostPolicies(c, map[string]HostPort{"x": port(p)})["x"]; r.Err != nil || !r.Changed {
				return fmt.Errorf("changed %v: %w", r.Changed, r.Err)
			}
			return CheckHostPolicy(c, "x", port(p))
		})
		if err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
	}
}

// A port synced from the plan it last held sends only the differences
// without reading its chains and sets back; a port whose kernel state is
// not what the caller believes (another writer's, or a sync that failed
// half-way) has that transaction refused, and is read back and brought to
// its plan in the same sync.
func TestHostPolicySyncedFromItsLastPlan(t *testing.T) {
	host := nstest.New(t)
	host.Bridge(t, "br0")
	plan := func(last byte, ports ...uint16) *netpol.Plan {
		return tcpPlan(hostRanges(netip.AddrFrom4([4]byte{10, 0, 0, last})), ports...)
	}
	a, b, c := plan(1, 80), plan(2, 81, 83), plan(3, 90, 92) // c: b's set names, other elements
	sync := func(want, prev *netpol.Plan) error {
		return InNamespace(host.Path, func(conn *nftables.Conn) error {
			p := HostPort{Bridge: "br0", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, Plan: want, Prev: prev}
			if r := SyncHostPolicies(conn, map[string]HostPort{"x": p})["x"]; r.Err != nil {
				return r.Err
			}
			p.Prev = nil
			return CheckHostPolicy(conn, "x", p)
		})
	}
	for i, step := range []struct {
		want, prev *netpol.Plan
	}{{a, nil}, {b, a}, {a, c}, {c, a}, {b, nil}} {
		if err := sync(step.want, step.prev); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

// tcpPlan isolates ingress but from the peers on the TCP ports.
func tcpPlan(peers []qos.Range, ports ...uint16) *netpol.Plan {
	var pr []netpol.PortRange
	for _, p := range ports {
		pr = append(pr, netpol.PortRange{Proto: 6, From: p, To: p})
	}
	return &netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{{V4: peers, V6: []qos.Range{}, Ports: pr}}}}
}

// IPv6 alike: what a pod sends from its link-local address passes its
// guard, what it sends from an address not its own does not.
func TestGuardDropsSpoofedIPv6(t *testing.T) {
	b := newSwitchBed(t, "a", "b")
	a, bb := b.pods["a"], b.pods["b"]
	b.guard(t, false, "a", "b")
	send := func(src netip.Addr) bool {
		t.Helper()
		var capture *rawframe.Capture
		bb.ns.Do(t, func() (err error) { capture, err = rawframe.Listen("eth0"); return err })
		defer capture.Close()
		marker := []byte("netclass-v6-" + src.String())
		payload, typ := rawframe.UDP(netip.AddrPortFrom(src, 5555), netip.AddrPortFrom(bb.ll, 9999), marker)
		a.ns.Do(t, func() error {
			return rawframe.Send("eth0", rawframe.Frame{Src: a.mac, Dst: bb.mac, Type: typ, Payload: payload})
		})
		got, err := capture.Wait(marker, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if !send(a.ll) {
		t.Error("a datagram from the pod's own link-local address did not arrive")
	}
	for _, src := range []netip.Addr{bb.ll, netip.MustParseAddr("fd00::9")} {
		if send(src) {
			t.Errorf("a datagram from %s crossed a's guarded port", src)
		}
	}
}

// Neighbour discovery names addresses in its body, which the source check
// does not read: a pod may advertise and probe (duplicate address detection)
// only its own addresses, and may still resolve any neighbour's.
func TestGuardDropsForgedNeighbourDiscovery(t *testing.T) {
	b := newSwitchBed(t, "a", "b")
	a, bb := b.pods["a"], b.pods["b"]
	gateway := netip.MustParseAddr("fe80::1")
	unspecified := netip.IPv6Unspecified()
	allNodes := net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	for _, guarded := range []bool{false, true} {
		if guarded {
			b.guard(t, false, "a", "b")
		}
		for _, tc := range []struct {
			name    string
			payload []byte
			forged  bool
		}{
			{"advertisement of its own address", rawframe.NeighborAdvertisement(a.ll, a.ll, a.mac), false},
			{"advertisement of a neighbour's address", rawframe.NeighborAdvertisement(a.ll, bb.ll, a.mac), true},
			{"advertisement of the gateway's address", rawframe.NeighborAdvertisement(a.ll, gateway, a.mac), true},
			{"probe of its own address", rawframe.NeighborSolicitation(unspecified, a.ll), false},
			{"probe of a neighbour's address", rawframe.NeighborSolicitation(unspecified, bb.ll), true},
			{"resolution of a neighbour's address", rawframe.NeighborSolicitation(a.ll, bb.ll), false},
		} {
			t.Run(fmt.Sprintf("guarded=%v/%s", guarded, tc.name), func(t *testing.T) {
				var capture *rawframe.Capture
				bb.ns.Do(t, func() (err error) { capture, err = rawframe.Listen("eth0"); return err })
				defer capture.Close()
				f := rawframe.Frame{Src: a.mac, Dst: allNodes, Type: rawframe.EtherIPv6, Payload: tc.payload}
				a.ns.Do(t, func() error { return rawframe.Send("eth0", f) })
				got, err := capture.Wait(tc.payload[40:], 500*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				if want := !guarded || !tc.forged; got != want {
					t.Errorf("arrived: %v, want %v", got, want)
				}
			})
		}
	}
}
