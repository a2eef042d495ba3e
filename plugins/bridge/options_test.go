package bridge

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// TestMacSpoofCheck: a pod that changes its MAC loses connectivity; CHECK
// passes before; DEL removes the rule table.
func TestMacSpoofCheck(t *testing.T) {
	h := cnitest.NewHost(t)
	n := newNetwork(t, "blue", "blue0", []string{"10.23.0.0/24"}, map[string]any{"macspoofchk": true})
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	ra := h.Add(t, plugin, n.bytes(t), a, "net1")
	rb := h.Add(t, plugin, n.bytes(t), b, "net1")
	if err := traffic.Ping(a.NS, podIP(t, rb, false), 5*time.Second); err != nil {
		t.Fatalf("before spoofing: %v", err)
	}
	if err := h.Check(t, plugin, n.bytes(t), ra, a, "net1"); err != nil {
		t.Fatalf("CHECK: %v", err)
	}
	run(t, "ip", "-n", a.NS.Name, "link", "set", "net1", "address", "02:de:ad:be:ef:01")
	run(t, "ip", "-n", a.NS.Name, "neigh", "flush", "all")
	if err := traffic.Ping(a.NS, podIP(t, rb, false), time.Second); err == nil {
		t.Fatal("a pod with a spoofed MAC still reaches its peer")
	}
	if err := h.Del(plugin, n.bytes(t), a, "net1"); err != nil {
		t.Fatal(err)
	}
	if out := h.NS.Ruleset(t); strings.Contains(out, "netclass_msc_"+bridgeport.HostVethName(a.ID, "net1")) {
		t.Errorf("DEL left the spoof-check table: %s", out)
	}
}

// TestIPMasq: traffic from the pod leaving the subnet through the host is
// source-NATed to the host's address, and DEL removes the rule.
func TestIPMasq(t *testing.T) {
	h := cnitest.NewHost(t)
	outside := nstest.New(t)
	nstest.Veth(t, h.NS, "up0", "192.168.231.1/24", outside, "up0", "192.168.231.2/24")
	n := newNetwork(t, "blue", "blue0", []string{"10.24.0.0/24"}, map[string]any{"ipMasq": true, "isDefaultGateway": true})
	p := cnitest.NewPod(t)
	h.Add(t, plugin, n.bytes(t), p, "net1")
	sniff, err := traffic.Sniff(outside, "up0")
	if err != nil {
		t.Fatal(err)
	}
	defer sniff.Close()
	dst := netip.MustParseAddr("192.168.231.2")
	p.NS.Do(t, func() error {
		c, err := net.Dial("udp", netip.AddrPortFrom(dst, 9).String())
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("x"))
		return err
	})
	got := sniff.WaitFor(func(pk traffic.Packet) bool { return pk.Dst == dst && pk.DstPort == 9 }, 1, 3*time.Second)
	if len(got) == 0 || got[0].Src != netip.MustParseAddr("192.168.231.1") {
		t.Fatalf("packets seen outside: %+v, want source 192.168.231.1 (masqueraded)", got)
	}
	// DEL after the pod's namespace is gone still removes the rule: the
	// addresses come from the attachment's record.
	gone := p.Call(plugin, "DEL", "net1", n.bytes(t))
	gone.NetNS = ""
	if err := p.NS.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Exec(gone); err != nil {
		t.Fatal(err)
	}
	if out := h.NS.Output(t, "iptables-save", "-t", "nat"); strings.Contains(out, p.ID) {
		t.Errorf("DEL left the masquerade rule:\n%s", out)
	}
}

// TestLinkOptions: hairpin on the host end, promiscuous bridge, MTU and a
// static MAC land on the links.
func TestLinkOptions(t *testing.T) {
	h := cnitest.NewHost(t)
	n := newNetwork(t, "blue", "blue0", []string{"10.25.0.0/24"}, map[string]any{
		"hairpinMode": true, "promiscMode": true, "mtu": 1400, "mac": "02:00:00:aa:bb:cc"})
	p := cnitest.NewPod(t)
	h.Add(t, plugin, n.bytes(t), p, "net1")
	pod := p.NS.Link(t, "net1")
	if pod.Attrs().MTU != 1400 || pod.Attrs().HardwareAddr.String() != "02:00:00:aa:bb:cc" {
		t.Errorf("pod end: mtu %d mac %s", pod.Attrs().MTU, pod.Attrs().HardwareAddr)
	}
	if br := h.NS.Link(t, "blue0"); br.Attrs().Promisc == 0 || br.Attrs().MTU != 1400 {
		t.Errorf("bridge: promisc %d mtu %d", br.Attrs().Promisc, br.Attrs().MTU)
	}
	host := h.NS.Link(t, bridgeport.HostVethName(p.ID, "net1"))
	pi, err := h.NS.Handle(t).LinkGetProtinfo(host)
	if err != nil {
		t.Fatal(err)
	}
	if !pi.Hairpin {
		t.Error("hairpin is off on the host end")
	}
}
