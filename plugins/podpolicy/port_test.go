package podpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/test/nstest"
)

// A bridged port's policy goes to the host side of the port, the port
// gets a guard if it had none and opens once both are in place, and a
// policy table an older netclass left in the pod goes.
func TestSyncPutsABridgedPortsPolicyOnTheHost(t *testing.T) {
	host, a, b := nstest.New(t), nstest.New(t), nstest.New(t)
	nstest.Veth(t, host, "ha", "", a, "net1", "10.97.0.1/24")
	nstest.Veth(t, host, "hb", "", b, "net1", "10.97.0.2/24")
	host.Bridge(t, "br0", "ha", "hb")
	ipA := netip.MustParseAddr("10.97.0.1")
	macA := a.Link(t, "net1").Attrs().HardwareAddr
	inHost := func(fn func(c *nftables.Conn) error) {
		t.Helper()
		if err := nft.InNamespace(host.Path, fn); err != nil {
			t.Fatal(err)
		}
	}
	// a's port starts closed, as netclass-dra's ADD leaves it; its pod holds an old table
	inHost(func(c *nftables.Conn) error { return nft.InstallGuard(c, "ha", nft.Guard{MAC: macA}, true) })
	if err := nft.InNamespace(a.Path, func(c *nftables.Conn) error {
		_, err := nft.SyncPolicy(c, "net1", &netpol.Plan{Egress: netpol.Direction{Isolated: true}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	deny := &netpol.Plan{Ingress: netpol.Direction{Isolated: true}}
	ifs := []Interface{{PodNS: a.Path, IfName: "net1", IPs: []netip.Addr{ipA}, Plan: deny},
		{PodNS: b.Path, IfName: "net1", IPs: []netip.Addr{netip.MustParseAddr("10.97.0.2")}, Plan: &netpol.Plan{}}}
	for round, want := range []bool{true, false} {
		var res []Result
		host.Do(t, func() error { res = Sync(ifs); return nil })
		for i, r := range res {
			if r.Err != nil || (i == 0 && r.Changed != want) {
				t.Fatalf("round %d, interface %d: changed %v, %v", round, i, r.Changed, r.Err)
			}
		}
	}
	inHost(func(c *nftables.Conn) error {
		closed, err := nft.GuardClosed(c)
		if err != nil || closed["ha"] {
			return fmt.Errorf("a's port is still closed (%v)", err)
		}
		guarded, err := nft.GuardedPorts(c)
		if err != nil || !guarded["hb"] {
			return fmt.Errorf("b's port got no guard (%v)", err)
		}
		return nft.CheckHostPolicy(c, "ha", nft.HostPort{Bridge: "br0", MAC: macA, Addrs: []netip.Addr{ipA}, Plan: deny})
	})
	if err := nft.InNamespace(a.Path, func(c *nftables.Conn) error {
		if ok, err := nft.HasPolicy(c, "net1"); err != nil || ok {
			return fmt.Errorf("the old table is still in the pod (%v)", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// the host enforces it: b cannot reach a, a reaches b
	var l net.Listener
	a.Do(t, func() (err error) { l, err = net.Listen("tcp", "10.97.0.1:80"); return err })
	defer l.Close()
	b.Do(t, func() error {
		if c, err := net.DialTimeout("tcp", "10.97.0.1:80", 300*time.Millisecond); err == nil {
			c.Close()
			return fmt.Errorf("b reached a, whose ingress is denied")
		}
		return nil
	})
}

// A new port no policy selects (it holds none, and is to hold none) is
// opened, its guard kept, and no policy table is made for it (that such a
// sync reads no table is nft's TestHostPolicyNoneToNoneReadsNothing).
func TestSyncOpensANewPortNoPolicySelects(t *testing.T) {
	host, a := nstest.New(t), nstest.New(t)
	nstest.Veth(t, host, "ha", "", a, "net1", "10.97.0.1/24")
	host.Bridge(t, "br0", "ha")
	mac := a.Link(t, "net1").Attrs().HardwareAddr
	ip := []netip.Addr{netip.MustParseAddr("10.97.0.1")}
	if err := nft.InNamespace(host.Path, func(c *nftables.Conn) error {
		return nft.InstallGuard(c, "ha", nft.Guard{MAC: mac, CheckIPs: true, V4: ip}, true) // as ADD leaves it
	}); err != nil {
		t.Fatal(err)
	}
	none := &netpol.Plan{}
	var res []Result
	host.Do(t, func() error {
		res = Sync([]Interface{{PodNS: a.Path, IfName: "net1", MAC: mac, IPs: ip, Plan: none, Prev: none}})
		return nil
	})
	if res[0].Err != nil || res[0].Port == nil || res[0].Port.HostIf != "ha" {
		t.Fatalf("sync: port %+v, %v", res[0].Port, res[0].Err)
	}
	if err := nft.InNamespace(host.Path, func(c *nftables.Conn) error {
		closed, err := nft.GuardClosed(c)
		if err != nil || closed["ha"] {
			return fmt.Errorf("the port is still closed (%v)", err)
		}
		tables, err := c.ListTables()
		for _, tb := range tables {
			if tb.Name == nft.HostPolicyTable {
				return fmt.Errorf("the sync made the policy table %s (family %d)", tb.Name, tb.Family)
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// A sync reports the port that holds the policy, and the next finds the
// port there (its pod's interface is not looked up: renamed, it is not
// found) while the host still has it; a port made again (a new index) is
// found from the pod again.
func TestSyncFindsThePortItRecorded(t *testing.T) {
	host, a := nstest.New(t), nstest.New(t)
	nstest.Veth(t, host, "ha", "", a, "net1", "10.97.0.1/24")
	host.Bridge(t, "br0", "ha")
	ip := []netip.Addr{netip.MustParseAddr("10.97.0.1")}
	mac := a.Link(t, "net1").Attrs().HardwareAddr
	deny := &netpol.Plan{Ingress: netpol.Direction{Isolated: true}}
	denyOut := &netpol.Plan{Ingress: deny.Ingress, Egress: netpol.Direction{Isolated: true}}
	sync := func(f Interface) Result {
		t.Helper()
		var res []Result
		host.Do(t, func() error { res = Sync([]Interface{f}); return nil })
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		return res[0]
	}
	first := sync(Interface{PodNS: a.Path, IfName: "net1", MAC: mac, IPs: ip, Plan: deny})
	want := Port{HostIf: "ha", HostIndex: host.Link(t, "ha").Attrs().Index, BridgeIndex: host.Link(t, "br0").Attrs().Index}
	if first.Port == nil || *first.Port != want {
		t.Fatalf("port %+v, want %+v", first.Port, want)
	}
	a.Do(t, func() error { // down first: some kernels refuse to rename an interface that is up
		h, l := a.Handle(t), a.Link(t, "net1")
		return errors.Join(h.LinkSetDown(l), h.LinkSetName(l, "net9"), h.LinkSetUp(l))
	})
	second := sync(Interface{PodNS: a.Path, IfName: "net1", MAC: mac, IPs: ip, Plan: denyOut, Prev: deny, Port: first.Port})
	if !second.Changed || second.Port == nil || *second.Port != want {
		t.Fatalf("with the port recorded: changed %v, port %+v, want %+v", second.Changed, second.Port, want)
	}
	checkHost := func(plan *netpol.Plan) {
		t.Helper()
		if err := nft.InNamespace(host.Path, func(c *nftables.Conn) error {
			return nft.CheckHostPolicy(c, "ha", nft.HostPort{Bridge: "br0", MAC: mac, Addrs: ip, Plan: plan})
		}); err != nil {
			t.Fatal(err)
		}
	}
	checkHost(denyOut)
	// the attachment made again: a new pair, its host end of the same name
	host.Do(t, func() error { return host.Handle(t).LinkDel(host.Link(t, "ha")) })
	nstest.Veth(t, host, "ha", "", a, "net1", "10.97.0.1/24")
	host.Do(t, func() error { return host.Handle(t).LinkSetMaster(host.Link(t, "ha"), host.Link(t, "br0")) })
	mac = a.Link(t, "net1").Attrs().HardwareAddr
	third := sync(Interface{PodNS: a.Path, IfName: "net1", MAC: mac, IPs: ip, Plan: deny, Prev: denyOut, Port: first.Port})
	if third.Port == nil || third.Port.HostIndex == want.HostIndex || third.Port.HostIf != "ha" {
		t.Fatalf("after the port was made again: port %+v, want ha with another index than %d", third.Port, want.HostIndex)
	}
	checkHost(deny)
}

// Check finds a port's policy changed behind netclass's back (its chain
// flushed), and a sync without the plan it held (as after an audit) puts
// it right.
func TestCheckFindsAPolicyChangedBehindItsBack(t *testing.T) {
	host, a := nstest.New(t), nstest.New(t)
	nstest.Veth(t, host, "ha", "", a, "net1", "10.97.0.1/24")
	host.Bridge(t, "br0", "ha")
	f := Interface{PodNS: a.Path, IfName: "net1", MAC: a.Link(t, "net1").Attrs().HardwareAddr,
		IPs: []netip.Addr{netip.MustParseAddr("10.97.0.1")}, Plan: &netpol.Plan{Ingress: netpol.Direction{Isolated: true}}}
	sync := func() Result {
		t.Helper()
		var res []Result
		host.Do(t, func() error { res = Sync([]Interface{f}); return res[0].Err })
		return res[0]
	}
	check := func() (err error) {
		host.Do(t, func() error { err = Check(f); return nil })
		return err
	}
	sync()
	if err := check(); err != nil {
		t.Fatalf("after the sync: %v", err)
	}
	if err := nft.InNamespace(host.Path, func(c *nftables.Conn) error {
		c.FlushChain(&nftables.Chain{Name: "in/ha", Table: &nftables.Table{Name: nft.HostPolicyTable, Family: nftables.TableFamilyINet}})
		return c.Flush()
	}); err != nil {
		t.Fatal(err)
	}
	if err := check(); err == nil {
		t.Fatal("Check passed a port whose policy chain was flushed")
	}
	if r := sync(); !r.Changed {
		t.Error("the sync after the flush changed nothing")
	}
	if err := check(); err != nil {
		t.Fatalf("after the sync that read the port back: %v", err)
	}
}

// The ports of a bridge netclass made get its own conntrack zone; the
// ports of a bridge it did not make (the primary network's, another
// plugin's) get none, and sync as before.
func TestSyncZonesOnlyTheBridgesNetclassMade(t *testing.T) {
	host, a, b := nstest.New(t), nstest.New(t), nstest.New(t)
	host.Do(t, func() error {
		_, err := link.EnsureBridge(link.BridgeSpec{Name: "ncbr9", Owner: "red"})
		return err
	})
	nstest.Veth(t, host, "ha", "", a, "net1", "10.97.0.1/24")
	nstest.Veth(t, host, "hb", "", b, "net1", "10.98.0.1/24")
	host.Bridge(t, "ncbr9", "ha")
	host.Bridge(t, "cni9", "hb")
	deny := &netpol.Plan{Ingress: netpol.Direction{Isolated: true}}
	ifs := []Interface{{PodNS: a.Path, IfName: "net1", IPs: []netip.Addr{netip.MustParseAddr("10.97.0.1")}, Plan: deny},
		{PodNS: b.Path, IfName: "net1", IPs: []netip.Addr{netip.MustParseAddr("10.98.0.1")}, Plan: deny}}
	var res []Result
	host.Do(t, func() error { res = Sync(ifs); return nil })
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("interface %d: %v", i, r.Err)
		}
	}
	mac := host.Link(t, "ncbr9").Attrs().HardwareAddr
	_, zones, _ := strings.Cut(host.Ruleset(t), "table inet "+nft.ZoneTable)
	zones, _, _ = strings.Cut(zones, "\ntable ")
	if !strings.Contains(zones, fmt.Sprintf(`"ncbr9" . %s`, mac)) || strings.Contains(zones, `"cni9"`) {
		t.Errorf("want a zone for ncbr9 (MAC %s) and none for cni9:\n%s", mac, zones)
	}
}
