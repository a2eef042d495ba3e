//go:build vmtest

package vlan

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/traffic"
	"github.com/netclass-dev/netclass/test/vm/guest"
)

// fabric is two hosts whose eth1 are trunk ports of a VLAN-filtering
// bridge in a "switch" namespace, carrying VLANs 100 and 200.
func fabric(t *testing.T) (*cnitest.Host, *cnitest.Host) {
	t.Helper()
	h1, h2, _ := fabricWithSwitch(t)
	return h1, h2
}

// fabricWithSwitch is fabric, and the switch's namespace: its bridge br0
// and the hosts' ports p1 and p2.
func fabricWithSwitch(t *testing.T) (*cnitest.Host, *cnitest.Host, *nstest.NS) {
	t.Helper()
	guest.Require(t, guest.VLAN, guest.BridgeVLANFiltering)
	sw := nstest.New(t)
	run(t, "ip", "-n", sw.Name, "link", "add", "br0", "type", "bridge", "vlan_filtering", "1")
	run(t, "ip", "-n", sw.Name, "link", "set", "br0", "up")
	h1, h2 := cnitest.NewHost(t), cnitest.NewHost(t)
	for i, h := range []*cnitest.Host{h1, h2} {
		port := []string{"p1", "p2"}[i]
		nstest.Veth(t, h.NS, "eth1", "", sw, port, "")
		run(t, "ip", "-n", sw.Name, "link", "set", port, "master", "br0")
		for _, vid := range []string{"100", "200"} {
			run(t, "bridge", "-n", sw.Name, "vlan", "add", "dev", port, "vid", vid)
		}
	}
	return h1, h2, sw
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func ip4(t *testing.T, r *current.Result) netip.Addr {
	t.Helper()
	a, ok := netip.AddrFromSlice(r.IPs[0].Address.IP.To4())
	if !ok {
		t.Fatalf("no IPv4 address in %v", r.IPs)
	}
	return a
}

// recordHoldsTheAddresses checks that the attachment's record (in the
// conf's dataDir) holds the result's addresses: netclass-dra reads a Multus
// attachment's own addresses from it.
func recordHoldsTheAddresses(t *testing.T, conf []byte, p *cnitest.Pod, res *current.Result) {
	t.Helper()
	var c struct {
		Name    string `json:"name"`
		DataDir string `json:"dataDir"`
	}
	if err := json.Unmarshal(conf, &c); err != nil {
		t.Fatal(err)
	}
	rec, err := attach.Store{Dir: c.DataDir}.Get(c.Name, p.ID, "net1")
	var got []string
	if rec != nil {
		got = rec.Addresses
	}
	if err != nil || len(res.IPs) != 1 || !slices.Equal(got, []string{res.IPs[0].Address.String()}) {
		t.Errorf("the record holds addresses %v (%v), the result %v", got, err, res.IPs)
	}
}

func TestVLANsThroughASwitch(t *testing.T) {
	h1, h2 := fabric(t)
	// Both VLANs use the same subnet: only the VLAN separates them.
	blue1 := conf(t, 100, "10.70.0.0/24", "10.70.0.10", "10.70.0.19", nil)
	blue2 := conf(t, 100, "10.70.0.0/24", "10.70.0.20", "10.70.0.29", nil)
	red1 := conf(t, 200, "10.70.0.0/24", "10.70.0.30", "10.70.0.39", nil)
	red2 := conf(t, 200, "10.70.0.0/24", "10.70.0.40", "10.70.0.49", nil)
	a, b, c, d := cnitest.NewPod(t), cnitest.NewPod(t), cnitest.NewPod(t), cnitest.NewPod(t)
	ra := h1.Add(t, plugin, blue1, a, "net1")
	rb := h2.Add(t, plugin, blue2, b, "net1")
	h1.Add(t, plugin, red1, c, "net1")
	rd := h2.Add(t, plugin, red2, d, "net1")

	if err := traffic.Ping(a.NS, ip4(t, rb), 5*time.Second); err != nil {
		t.Errorf("VLAN 100 across the switch: %v", err)
	}
	if err := traffic.Ping(c.NS, ip4(t, rd), 5*time.Second); err != nil {
		t.Errorf("VLAN 200 across the switch (the control for isolation): %v", err)
	}
	for _, target := range []netip.Addr{ip4(t, rb), ip4(t, ra)} {
		if err := traffic.Ping(c.NS, target, time.Second); err == nil {
			t.Errorf("a VLAN 200 pod reached VLAN 100's %s on the same subnet", target)
		}
	}
	recordHoldsTheAddresses(t, blue1, a, ra)
	if err := h1.Check(t, plugin, blue1, ra, a, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	run(t, "ip", "-n", a.NS.Name, "link", "set", "net1", "down")
	if err := h1.Check(t, plugin, blue1, ra, a, "net1"); err == nil {
		t.Error("CHECK passed with the link down")
	}
	for range 2 {
		if err := h1.Del(plugin, blue1, a, "net1"); err != nil {
			t.Fatalf("DEL: %v", err)
		}
	}
	if a.NS.HasLink(t, "net1") {
		t.Error("DEL left the VLAN link")
	}
}

// The kernel allows one 802.1Q sub-interface per VLAN ID on a master, so
// the pods of a VLAN on a host share it through the VLAN's bridge: two pods
// of VLAN 100 on h1 reach each other and a pod on h2; a VLAN 200 pod on h1
// on the same subnet reaches none of them; another network cannot join VLAN
// 100's devices; the devices outlive the first DEL and go with the last.
func TestPodsOfAVLANShareItsHostDevices(t *testing.T) {
	h1, h2 := fabric(t)
	blueA := conf(t, 100, "10.74.0.0/24", "10.74.0.10", "10.74.0.19", nil)
	blueB := conf(t, 100, "10.74.0.0/24", "10.74.0.20", "10.74.0.29", nil)
	blueC := conf(t, 100, "10.74.0.0/24", "10.74.0.30", "10.74.0.39", nil)
	red := conf(t, 200, "10.74.0.0/24", "10.74.0.40", "10.74.0.49", map[string]any{"name": "red"})
	a, b, c, r := cnitest.NewPod(t), cnitest.NewPod(t), cnitest.NewPod(t), cnitest.NewPod(t)
	ra := h1.Add(t, plugin, blueA, a, "net1")
	rb := h1.Add(t, plugin, blueB, b, "net1")
	rc := h2.Add(t, plugin, blueC, c, "net1")
	h1.Add(t, plugin, red, r, "net1")
	for _, p := range []struct {
		from *cnitest.Pod
		to   *current.Result
		what string
	}{{a, rb, "a to b on the same host"}, {b, ra, "b to a"}, {a, rc, "a to c across the switch"}, {b, rc, "b to c"}} {
		if err := traffic.Ping(p.from.NS, ip4(t, p.to), 5*time.Second); err != nil {
			t.Errorf("VLAN 100, %s: %v", p.what, err)
		}
	}
	for _, target := range []*current.Result{ra, rb, rc} {
		if err := traffic.Ping(r.NS, ip4(t, target), time.Second); err == nil {
			t.Errorf("a VLAN 200 pod on h1 reached VLAN 100's %s on the same subnet", ip4(t, target))
		}
	}

	blue := netconf.VLAN{Master: "eth1", VLANID: 100}
	for _, dev := range []string{blue.BridgeName(), blue.DeviceName()} {
		if l := h1.NS.Link(t, dev); !strings.Contains(l.Attrs().Alias, "vl") {
			t.Errorf("%s is not tagged with its network: alias %q", dev, l.Attrs().Alias)
		}
	}
	_, err := h1.Exec(cnitest.NewPod(t).Call(plugin, "ADD", "net1",
		conf(t, 100, "10.74.0.0/24", "10.74.0.50", "10.74.0.59", map[string]any{"name": "intruder"})))
	if err == nil || !strings.Contains(err.Error(), `belongs to network "vl", not to network "intruder"`) {
		t.Errorf("another network joined VLAN 100's devices: %v", err)
	}

	if err := h1.Del(plugin, blueA, a, "net1"); err != nil {
		t.Fatal(err)
	}
	if !h1.NS.HasLink(t, blue.BridgeName()) || !h1.NS.HasLink(t, blue.DeviceName()) {
		t.Fatal("the first DEL removed the devices b still uses")
	}
	if err := traffic.Ping(b.NS, ip4(t, rc), 5*time.Second); err != nil {
		t.Errorf("b after a left: %v", err)
	}
	if err := h1.Del(plugin, blueB, b, "net1"); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{blue.BridgeName(), blue.DeviceName()} {
		if h1.NS.HasLink(t, dev) {
			t.Errorf("the last DEL left %s", dev)
		}
	}
	var last struct{ DataDir string }
	if err := json.Unmarshal(blueB, &last); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(last.DataDir, "locks", "vlan-"+blue.BridgeName()+".lock")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the VLAN's lock file outlived its devices: %v", err)
	}
}

func TestQoSOnAVLANAttachment(t *testing.T) {
	egress, ingress := float64(traffic.Rate(20_000_000)), float64(traffic.Rate(10_000_000))
	h1, h2 := fabric(t)
	qos := map[string]any{"qos": map[string]any{"dscp": 46, "egressRate": egress, "egressBurst": 100_000,
		"ingressRate": ingress, "ingressBurst": 100_000,
		"egress": []any{map[string]any{"priority": 1, "dscp": 10, "classifier": map[string]any{
			"ports": []any{map[string]any{"protocol": "UDP", "port": 6000}}}}}}}
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	confA := conf(t, 100, "10.71.0.0/24", "10.71.0.10", "10.71.0.19", qos)
	ra := h1.Add(t, plugin, confA, a, "net1")
	rb := h2.Add(t, plugin, conf(t, 100, "10.71.0.0/24", "10.71.0.20", "10.71.0.29", nil), b, "net1")
	if err := traffic.Ping(a.NS, ip4(t, rb), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	sniff, err := traffic.Sniff(b.NS, "net1")
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []uint16{6000, 6001} {
		a.NS.Do(t, func() error {
			c, err := net.Dial("udp", netip.AddrPortFrom(ip4(t, rb), port).String())
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("x"))
			return err
		})
	}
	for port, want := range map[uint16]uint8{6000: 10, 6001: 46} {
		got := sniff.WaitFor(func(p traffic.Packet) bool { return p.DstPort == port }, 1, 3*time.Second)
		if len(got) == 0 || got[0].DSCP != want {
			t.Errorf("UDP/%d over the VLAN: %+v, want DSCP %d", port, got, want)
		}
	}
	sniff.Close()
	out, err := traffic.TCPRate(a.NS, b.NS, ip4(t, rb), 7001, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	in, err := traffic.TCPRate(b.NS, a.NS, ip4(t, ra), 7002, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("egress %.2f Mbit/s (configured %.0f), ingress %.2f Mbit/s (configured %.0f)", out/1e6, egress/1e6, in/1e6, ingress/1e6)
	if out < 0.8*egress || out > 1.2*egress {
		t.Errorf("egress %.2f Mbit/s, configured %.0f", out/1e6, egress/1e6)
	}
	if in < 0.8*ingress || in > 1.2*ingress {
		t.Errorf("ingress %.2f Mbit/s, configured %.0f", in/1e6, ingress/1e6)
	}
	if err := h1.Check(t, plugin, confA, ra, a, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if err := h1.GC(t, plugin, confA); err != nil {
		t.Fatal(err)
	}
	if a.NS.HasLink(t, "net1") {
		t.Error("GC with no valid attachment left the VLAN link")
	}
}

// A VLAN attachment's host end is a port of the VLAN's bridge: its marking
// and meters sit in the host's bridge table, like netclass-bridge's. An
// application sending UDP at three times a rule's rate sees no error on its
// socket and the receiver across the switch gets the rule's rate; a TCP
// stream through another rule converges near its rate without failing; the
// rules are where CHECK looks.
func TestMetersOnAVLANAttachmentAreTransparent(t *testing.T) {
	meterKbps := float64(traffic.Rate(5000))
	h1, h2 := fabric(t)
	rule := func(proto string, port int) map[string]any {
		return map[string]any{"priority": 1, "dscp": 10,
			"classifier": map[string]any{"ports": []any{map[string]any{"protocol": proto, "port": port}}},
			"bandwidth":  map[string]any{"rate": meterKbps, "burst": meterKbps / 10}}
	}
	confA := conf(t, 100, "10.73.0.0/24", "10.73.0.10", "10.73.0.19", map[string]any{"qos": map[string]any{
		"dscp": 46, "egress": []any{rule("UDP", 5201), rule("TCP", 5202)}}})
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	ra := h1.Add(t, plugin, confA, a, "net1")
	rb := h2.Add(t, plugin, conf(t, 100, "10.73.0.0/24", "10.73.0.20", "10.73.0.29", nil), b, "net1")
	if err := traffic.Ping(a.NS, ip4(t, rb), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	udp, err := traffic.IPerf3{Client: a.NS, Server: b.NS, Addr: ip4(t, rb), Port: 5201,
		UDPBps: 3 * meterKbps * 1000, Duration: 4 * time.Second, Omit: 2 * time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("UDP: sent %.2f Mbit/s, received %.2f Mbit/s (rule %.2f)", udp.SentBps/1e6, udp.ReceivedBps/1e6, meterKbps/1e3)
	if udp.Error != "" {
		t.Errorf("the UDP sender got an error: %s", udp.Error)
	} else if udp.ReceivedBps < 0.85*meterKbps*1000 || udp.ReceivedBps > 1.15*meterKbps*1000 {
		t.Errorf("UDP received %.2f Mbit/s, rule rate %.2f", udp.ReceivedBps/1e6, meterKbps/1e3)
	}
	tcp, err := traffic.IPerf3{Client: a.NS, Server: b.NS, Addr: ip4(t, rb), Port: 5202,
		Duration: 5 * time.Second, Omit: 2 * time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TCP: received %.2f Mbit/s (rule %.2f), %d retransmissions", tcp.ReceivedBps/1e6, meterKbps/1e3, tcp.Retransmits)
	if tcp.Error != "" {
		t.Errorf("the TCP stream failed: %s", tcp.Error)
	} else if tcp.ReceivedBps < 0.8*meterKbps*1000 || tcp.ReceivedBps > 1.2*meterKbps*1000 {
		t.Errorf("TCP received %.2f Mbit/s, rule rate %.2f", tcp.ReceivedBps/1e6, meterKbps/1e3)
	}
	hostIf := hostEnd(t, ra)
	if out, err := exec.Command("ip", "netns", "exec", h1.NS.Name, "nft", "list", "chain", "bridge", nft.PortQoSTable, nft.PortChain(hostIf)).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "goto "+nft.PortChain(hostIf)+"/r0") {
		t.Errorf("no rules for the host end %s in the host's bridge table: %v\n%s", hostIf, err, out)
	}
	if err := h1.Check(t, plugin, confA, ra, a, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	run(t, "ip", "netns", "exec", h1.NS.Name, "nft", "flush", "chain", "bridge", nft.PortQoSTable, nft.PortChain(hostIf)+"/r0")
	if err := h1.Check(t, plugin, confA, ra, a, "net1"); err == nil {
		t.Error("CHECK passed with a rule's chain flushed")
	}
	for range 2 {
		if err := h1.Del(plugin, confA, a, "net1"); err != nil {
			t.Fatalf("DEL: %v", err)
		}
	}
	if out := a.NS.Ruleset(t); out != "" {
		t.Errorf("DEL left nftables state in the pod: %s", out)
	}
	if out := h1.NS.Ruleset(t); strings.Contains(out, hostIf) {
		t.Errorf("DEL left the host end's rules:\n%s", out)
	}
}

// hostEnd is the host end of the pod's veth in a result.
func hostEnd(t *testing.T, r *current.Result) string {
	t.Helper()
	if len(r.Interfaces) != 3 || r.Interfaces[1].Sandbox != "" {
		t.Fatalf("interfaces %v, want bridge, host end, pod end", r.Interfaces)
	}
	return r.Interfaces[1].Name
}

func TestLinkInContainer(t *testing.T) {
	guest.Require(t, guest.VLAN)
	h := cnitest.NewHost(t)
	p, peer := cnitest.NewPod(t), nstest.New(t)
	nstest.Veth(t, p.NS, "eth1", "", peer, "eth1", "") // the master lives in the pod
	c := conf(t, 300, "10.72.0.0/24", "10.72.0.10", "10.72.0.19", map[string]any{"linkInContainer": true})
	res := h.Add(t, plugin, c, p, "net1")
	recordHoldsTheAddresses(t, c, p, res)
	if err := h.Check(t, plugin, c, res, p, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if err := h.Del(plugin, c, p, "net1"); err != nil {
		t.Fatal(err)
	}
	if p.NS.HasLink(t, "net1") || !p.NS.HasLink(t, "eth1") {
		t.Error("DEL must remove the VLAN and keep its master")
	}
}
