package nft

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/rawframe"
)

// Two tenants' networks on one node, with the same subnet (tenants choose
// theirs): n1 and n2 on bridge brn, x and v on bridge brs, x with n1's
// address and v with n2's. n1 and n2 exchange datagrams 10.7.0.7:4000 <->
// 10.7.0.5:53; then x sends v the same 5-tuple, though v's policy lets
// nothing in. Without zones the node's conntrack takes x's datagram for
// n2's flow and v's policy lets it through as established; with each
// bridge in its own zone it is dropped.
func TestZonesKeepEachBridgesConnections(t *testing.T) {
	for _, zoned := range []bool{false, true} {
		t.Run(fmt.Sprintf("zoned=%v", zoned), func(t *testing.T) {
			host, pods := newZoneBed(t)
			if zoned {
				ensureZones(t, host, "brn", "brs")
			}
			v := pods["v"]
			isolated := &netpol.Plan{Ingress: netpol.Direction{Isolated: true}}
			if err := InNamespace(host.Path, func(c *nftables.Conn) error {
				return SyncHostPolicies(c, map[string]HostPort{v.hostIf: {Bridge: "brs", MAC: v.mac, Addrs: []netip.Addr{v.ip}, Plan: isolated}})[v.hostIf].Err
			}); err != nil {
				t.Fatal(err)
			}
			if !udpArrives(t, pods["n1"], 4000, pods["n2"], 53) || !udpArrives(t, pods["n2"], 53, pods["n1"], 4000) {
				t.Fatal("n1 and n2 could not exchange datagrams on their own bridge")
			}
			if got := udpArrives(t, pods["x"], 4000, v, 53); got != !zoned {
				t.Errorf("x's datagram with the 5-tuple of a flow on another bridge reached v, whose policy lets nothing in: %v, want %v", got, !zoned)
			}
		})
	}
}

// EnsureZones makes each bridge's entry once, refuses a bridge whose zone
// another one has, and drops the entries of bridges that are gone.
func TestEnsureZones(t *testing.T) {
	host, _ := newZoneBed(t)
	ensureZones(t, host, "brn", "brs")
	// nothing to change: no question about the node's links, no transaction
	if err := InNamespace(host.Path, func(c *nftables.Conn) error {
		asked := func(name string) bool {
			t.Errorf("a sync with nothing to change asked whether %s exists", name)
			return true
		}
		refused, err := EnsureZones(c, []ZoneBridge{zoneBridge(t, host, "brn"), zoneBridge(t, host, "brs")}, asked,
			func(b ZoneBridge) error { return fmt.Errorf("%s's entry made again", b.Name) })
		if err == nil && len(refused) > 0 {
			err = fmt.Errorf("refused %v", refused)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ruleset := host.Ruleset(t)
	for _, want := range []string{"ct zone set iifname map @zones", "iifname . ether daddr @local return"} {
		if !strings.Contains(ruleset, want) {
			t.Errorf("the zone table has no %q:\n%s", want, ruleset)
		}
	}
	brn, brs := zoneBridge(t, host, "brn"), zoneBridge(t, host, "brs")
	want := zoneState{base: true, zones: map[string]uint16{"brn": brn.Zone(), "brs": brs.Zone()},
		macs: map[string][]net.HardwareAddr{"brn": {brn.MAC}, "brs": {brs.MAC}}}
	if got := readZoneTable(t, host); !reflect.DeepEqual(got, want) {
		t.Errorf("the zone table holds %+v, want %+v", got, want)
	}
	twin := ZoneBridge{Name: "brtwin", Index: brn.Index + 65535, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	exists := func(name string) bool { return name != "brs" }
	if err := InNamespace(host.Path, func(c *nftables.Conn) error {
		refused, err := EnsureZones(c, []ZoneBridge{brn, twin}, exists, func(ZoneBridge) error { return nil })
		var ce *ZoneCollisionError
		if err == nil && (!errors.As(refused["brtwin"], &ce) || ce.Other != "brn" || refused["brn"] != nil) {
			return fmt.Errorf("refused %v, want brtwin alone, for brn's zone", refused)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	delete(want.zones, "brs")
	delete(want.macs, "brs")
	if got := readZoneTable(t, host); !reflect.DeepEqual(got, want) {
		t.Errorf("after brs went and brtwin was refused, the zone table holds %+v, want %+v", got, want)
	}
}

func zoneBridge(t *testing.T, host *nstest.NS, name string) (b ZoneBridge) {
	t.Helper()
	host.Do(t, func() error {
		l, err := net.InterfaceByName(name)
		if err == nil {
			b = ZoneBridge{Name: name, Index: l.Index, MAC: l.HardwareAddr}
		}
		return err
	})
	return b
}

func readZoneTable(t *testing.T, host *nstest.NS) (st zoneState) {
	t.Helper()
	if err := InNamespace(host.Path, func(c *nftables.Conn) (err error) { st, err = readZones(c); return err }); err != nil {
		t.Fatal(err)
	}
	return st
}

// newZoneBed makes the host namespace and its two bridges' pods.
func newZoneBed(t *testing.T) (*nstest.NS, map[string]*swPod) {
	host := nstest.New(t)
	host.Do(t, func() error {
		if err := link.LoadBridgeNetfilter(); err != nil {
			return err
		}
		return writeSysctl("/proc/sys/net/bridge/bridge-nf-call-iptables", "0")
	})
	pods := map[string]*swPod{}
	for _, p := range []struct{ name, bridge, ip string }{
		{"n1", "brn", "10.7.0.7"}, {"n2", "brn", "10.7.0.5"}, {"x", "brs", "10.7.0.7"}, {"v", "brs", "10.7.0.5"},
	} {
		pod := &swPod{ns: nstest.New(t), hostIf: "p" + p.name, ip: netip.MustParseAddr(p.ip)}
		nstest.Veth(t, host, pod.hostIf, "", pod.ns, "eth0", p.ip+"/24")
		host.Bridge(t, p.bridge, pod.hostIf)
		pod.mac = pod.ns.Link(t, "eth0").Attrs().HardwareAddr
		pods[p.name] = pod
	}
	host.Do(t, func() error {
		for _, name := range []string{"brn", "brs"} {
			br, err := link.ByName(name)
			if err == nil {
				err = link.BridgeNetfilter(br)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	return host, pods
}

func ensureZones(t *testing.T, host *nstest.NS, names ...string) {
	t.Helper()
	var bridges []ZoneBridge
	for _, n := range names {
		bridges = append(bridges, zoneBridge(t, host, n))
	}
	if err := InNamespace(host.Path, func(c *nftables.Conn) error {
		refused, err := EnsureZones(c, bridges, func(string) bool { return true }, func(ZoneBridge) error { return nil })
		if err == nil && len(refused) > 0 {
			err = fmt.Errorf("refused %v", refused)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// udpArrives sends a datagram from the pod's port to the receiver's port
// through a socket and reports whether it reached the receiver's interface.
func udpArrives(t *testing.T, from *swPod, fromPort int, to *swPod, toPort int) bool {
	t.Helper()
	marker := []byte(fmt.Sprintf("netclass-zone-%d", time.Now().UnixNano()))
	var capture *rawframe.Capture
	to.ns.Do(t, func() (err error) { capture, err = rawframe.Listen("eth0"); return err })
	defer capture.Close()
	from.ns.Do(t, func() error {
		c, err := net.DialUDP("udp", &net.UDPAddr{IP: from.ip.AsSlice(), Port: fromPort}, &net.UDPAddr{IP: to.ip.AsSlice(), Port: toPort})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(marker)
		return err
	})
	got, err := capture.Wait(marker, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Frames to the bridge's own MAC stay in the node's zone: the node reaches
// a pod whose policy lets nothing out, its replies passing as established
// (they are addressed to the bridge, where the node's connection is).
func TestZonesLeaveTheNodesOwnTraffic(t *testing.T) {
	host, pods := newZoneBed(t)
	v := pods["v"]
	host.Do(t, func() error {
		br, err := netlink.LinkByName("brs")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(br, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("10.7.0.254"), Mask: net.CIDRMask(24, 32)}})
	})
	ensureZones(t, host, "brn", "brs")
	isolated := &netpol.Plan{Egress: netpol.Direction{Isolated: true}, Ingress: netpol.Direction{Isolated: true}}
	if err := InNamespace(host.Path, func(c *nftables.Conn) error {
		return SyncHostPolicies(c, map[string]HostPort{v.hostIf: {Bridge: "brs", MAC: v.mac, Addrs: []netip.Addr{v.ip}, Plan: isolated}})[v.hostIf].Err
	}); err != nil {
		t.Fatal(err)
	}
	var l net.Listener
	v.ns.Do(t, func() (err error) { l, err = net.Listen("tcp", "10.7.0.5:8080"); return err })
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}()
	host.Do(t, func() error {
		c, err := net.DialTimeout("tcp", "10.7.0.5:8080", 2*time.Second)
		if err != nil {
			return fmt.Errorf("the node could not reach a pod of a zoned bridge: %w", err)
		}
		return c.Close()
	})
}
