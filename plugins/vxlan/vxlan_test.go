package vxlan

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/traffic"
)

const plugin = "netclass-vxlan"

// node is a host namespace with an underlay address and its own state dirs.
type node struct {
	*cnitest.Host
	addr    string
	dataDir string
	ipamDir string
}

// twoNodes joins two host namespaces with a veth underlay 10.50.0.0/24.
func twoNodes(t *testing.T) (*node, *node) {
	t.Helper()
	a := &node{Host: cnitest.NewHost(t), addr: "10.50.0.1", dataDir: t.TempDir(), ipamDir: t.TempDir()}
	b := &node{Host: cnitest.NewHost(t), addr: "10.50.0.2", dataDir: t.TempDir(), ipamDir: t.TempDir()}
	nstest.Veth(t, a.NS, "under0", a.addr+"/24", b.NS, "under0", b.addr+"/24")
	return a, b
}

// conf renders a vxlan network for node n: unicast to the other node,
// addresses from [start, end] of subnet.
func (n *node) conf(t *testing.T, name string, vni int, subnet, start, end string, extra map[string]any) []byte {
	t.Helper()
	other := "10.50.0.2"
	if n.addr == other {
		other = "10.50.0.1"
	}
	c := map[string]any{
		"cniVersion": "1.1.0", "name": name, "type": plugin, "vni": vni, "master": "under0",
		"remotes": []string{other}, "dataDir": n.dataDir,
		"ipam": map[string]any{"type": "host-local", "dataDir": n.ipamDir,
			"ranges": []any{[]any{map[string]any{"subnet": subnet, "rangeStart": start, "rangeEnd": end}}}},
	}
	for k, v := range extra {
		c[k] = v
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ip4(t *testing.T, r *current.Result) netip.Addr {
	t.Helper()
	a, ok := netip.AddrFromSlice(r.IPs[0].Address.IP.To4())
	if !ok {
		t.Fatalf("no IPv4 address: %v", r.IPs)
	}
	return a
}

func TestReachAcrossNodesIsolatedAcrossVNIs(t *testing.T) {
	n1, n2 := twoNodes(t)
	// Both VNIs use the same subnet: only the VNI separates them.
	blue1 := n1.conf(t, "blue", 100, "10.60.0.0/24", "10.60.0.10", "10.60.0.19", nil)
	blue2 := n2.conf(t, "blue", 100, "10.60.0.0/24", "10.60.0.20", "10.60.0.29", nil)
	red1 := n1.conf(t, "red", 200, "10.60.0.0/24", "10.60.0.30", "10.60.0.39", nil)
	red2 := n2.conf(t, "red", 200, "10.60.0.0/24", "10.60.0.40", "10.60.0.49", nil)
	a, b, c, d, e := cnitest.NewPod(t), cnitest.NewPod(t), cnitest.NewPod(t), cnitest.NewPod(t), cnitest.NewPod(t)
	ra := n1.Add(t, plugin, blue1, a, "net1")
	rb := n2.Add(t, plugin, blue2, b, "net1")
	n1.Add(t, plugin, blue1, c, "net1")
	n1.Add(t, plugin, red1, d, "net1")
	re := n2.Add(t, plugin, red2, e, "net1")

	if err := traffic.Ping(a.NS, ip4(t, rb), 5*time.Second); err != nil {
		t.Errorf("blue pod on node 1 -> blue pod on node 2: %v", err)
	}
	if err := traffic.Ping(c.NS, ip4(t, ra), 5*time.Second); err != nil {
		t.Errorf("blue pods on one node: %v", err)
	}
	if err := traffic.Ping(d.NS, ip4(t, re), 5*time.Second); err != nil {
		t.Errorf("red pods across nodes (the control for isolation): %v", err)
	}
	for _, target := range []netip.Addr{ip4(t, ra), ip4(t, rb)} {
		if err := traffic.Ping(d.NS, target, time.Second); err == nil {
			t.Errorf("red pod (VNI 200) reached blue %s (VNI 100) on the same subnet", target)
		}
	}
	if got := a.NS.Link(t, "net1").Attrs().MTU; got != 1450 {
		t.Errorf("pod MTU %d, want the underlay's 1500 - 50", got)
	}
	if err := n1.Check(t, plugin, blue1, ra, a, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
}

func TestSharedDevicesLiveUntilTheLastAttachment(t *testing.T) {
	n1, _ := twoNodes(t)
	conf := n1.conf(t, "blue", 100, "10.61.0.0/24", "10.61.0.10", "10.61.0.99", nil)
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	n1.Add(t, plugin, conf, a, "net1")
	n1.Add(t, plugin, conf, b, "net1")
	if err := n1.Del(plugin, conf, a, "net1"); err != nil {
		t.Fatal(err)
	}
	if !n1.NS.HasLink(t, "ncvx100") || !n1.NS.HasLink(t, "ncbr100") {
		t.Fatal("the VNI's devices went while a pod still uses them")
	}
	lock := filepath.Join(n1.dataDir, "locks", "vxlan-100.lock")
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the VNI's lock while a pod uses it: %v", err)
	}
	for range 2 {
		if err := n1.Del(plugin, conf, b, "net1"); err != nil {
			t.Fatal(err)
		}
	}
	if n1.NS.HasLink(t, "ncvx100") || n1.NS.HasLink(t, "ncbr100") {
		t.Fatal("the VNI's devices outlived its last pod")
	}
	if _, err := os.Stat(lock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the VNI's lock file outlived its devices: %v", err)
	}
}

// The record of an attachment holds its addresses: netclass-dra's agent
// reads them for the attachments Multus makes (their policies need the
// pod's own addresses), as DEL's teardown does.
func TestTheRecordHoldsTheAddresses(t *testing.T) {
	n1, _ := twoNodes(t)
	conf := n1.conf(t, "blue", 101, "10.62.0.0/24", "10.62.0.10", "10.62.0.99", nil)
	a := cnitest.NewPod(t)
	res := n1.Add(t, plugin, conf, a, "net1")
	t.Cleanup(func() { _ = n1.Del(plugin, conf, a, "net1") })
	rec, err := attach.Store{Dir: n1.dataDir}.Get("blue", a.ID, "net1")
	if err != nil || rec == nil {
		t.Fatalf("record of blue/%s/net1: %+v, %v", a.ID, rec, err)
	}
	if len(res.IPs) != 1 || len(rec.Addresses) != 1 || rec.Addresses[0] != res.IPs[0].Address.String() {
		t.Fatalf("the record holds addresses %v, the result %v", rec.Addresses, res.IPs)
	}
}

func TestConcurrentAddsAndDelsOnOneVNI(t *testing.T) {
	n1, n2 := twoNodes(t)
	conf := n1.conf(t, "blue", 300, "10.62.0.0/24", "10.62.0.10", "10.62.0.99", nil)
	const n = 12
	pods := make([]*cnitest.Pod, n)
	for i := range pods {
		pods[i] = cnitest.NewPod(t)
	}
	// Half the pods attach first; then the others attach while those leave,
	// so creation and last-pod removal race.
	parallel(t, pods[:n/2], func(p *cnitest.Pod) error { _, err := n1.Exec(p.Call(plugin, "ADD", "net1", conf)); return err })
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := "ADD"
			if i < n/2 {
				cmd = "DEL"
			}
			if _, err := n1.Exec(p.Call(plugin, cmd, "net1", conf)); err != nil {
				errs <- fmt.Errorf("%s %d: %w", cmd, i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every remaining pod must still reach the other node through the VNI.
	remote := cnitest.NewPod(t)
	rr := n2.Add(t, plugin, n2.conf(t, "blue", 300, "10.62.0.0/24", "10.62.0.200", "10.62.0.250", nil), remote, "net1")
	for _, p := range pods[n/2:] {
		if err := traffic.Ping(p.NS, ip4(t, rr), 5*time.Second); err != nil {
			t.Errorf("pod %s after the race: %v", p.ID, err)
		}
	}
}

func parallel(t *testing.T, pods []*cnitest.Pod, f func(*cnitest.Pod) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	for i, p := range pods {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(p) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestMulticastGroup(t *testing.T) {
	n1, n2 := twoNodes(t)
	extra := map[string]any{"group": "239.1.1.1", "remotes": nil}
	c1 := n1.conf(t, "blue", 400, "10.63.0.0/24", "10.63.0.10", "10.63.0.19", extra)
	c2 := n2.conf(t, "blue", 400, "10.63.0.0/24", "10.63.0.20", "10.63.0.29", extra)
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	n1.Add(t, plugin, c1, a, "net1")
	rb := n2.Add(t, plugin, c2, b, "net1")
	if err := traffic.Ping(a.NS, ip4(t, rb), 5*time.Second); err != nil {
		t.Errorf("multicast-flooded VNI: %v", err)
	}
}

func TestCheckNoticesVXLANChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper []string
	}{
		{"flood entry removed", []string{"bridge", "fdb", "del", "00:00:00:00:00:00", "dev", "ncvx100", "dst", "10.50.0.2"}},
		{"vxlan device down", []string{"ip", "link", "set", "ncvx100", "down"}},
		{"vxlan device left the bridge", []string{"ip", "link", "set", "ncvx100", "nomaster"}},
		{"tunnel ECN rules flushed", []string{"nft", "flush", "chain", "inet", "netclass_tunnel_ecn", "output"}},
		{"tunnel TOS cleared", []string{"ip", "link", "set", "ncvx100", "type", "vxlan", "tos", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n1, _ := twoNodes(t)
			conf := n1.conf(t, "blue", 100, "10.64.0.0/24", "10.64.0.10", "10.64.0.19", nil)
			p := cnitest.NewPod(t)
			res := n1.Add(t, plugin, conf, p, "net1")
			args := append([]string{"netns", "exec", n1.NS.Name}, tc.tamper...)
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				t.Fatalf("tamper: %v\n%s", err, out)
			}
			if err := n1.Check(t, plugin, conf, res, p, "net1"); err == nil {
				t.Fatal("CHECK passed after tampering")
			}
		})
	}
}

func TestErrors(t *testing.T) {
	n1, _ := twoNodes(t)
	p := cnitest.NewPod(t)
	tests := []struct {
		name  string
		extra map[string]any
		cmd   string
		code  uint
		want  string
	}{
		{"missing master", map[string]any{"master": "nope0"}, "ADD", types.ErrInvalidNetworkConfig, "master: "},
		{"mtu above the underlay", map[string]any{"mtu": 1460}, "ADD", types.ErrInvalidNetworkConfig, "mtu: 1460 exceeds"},
		{"STATUS without master", map[string]any{"master": "nope0"}, "STATUS", attach.ErrPluginNotAvailable, "nope0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n1.Exec(p.Call(plugin, tc.cmd, "net1", n1.conf(t, "blue", 100, "10.65.0.0/24", "10.65.0.10", "10.65.0.19", tc.extra)))
			var e *types.Error
			if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Msg, tc.want) {
				t.Fatalf("error = %v, want code %d containing %q", err, tc.code, tc.want)
			}
		})
	}
	// A device of the VNI with other settings is refused, not reused.
	other := n1.conf(t, "blue", 100, "10.65.0.0/24", "10.65.0.10", "10.65.0.19", map[string]any{"port": 8472})
	q := cnitest.NewPod(t)
	n1.Add(t, plugin, n1.conf(t, "blue", 100, "10.65.0.0/24", "10.65.0.10", "10.65.0.19", nil), q, "net1")
	_, err := n1.Exec(p.Call(plugin, "ADD", "net1", other))
	if err == nil || !strings.Contains(err.Error(), "port 4789, want 8472") {
		t.Fatalf("ADD with another port on an existing VNI: %v", err)
	}
	if p.NS.HasLink(t, "net1") {
		t.Error("the refused ADD left an interface")
	}
}

func TestGCAndQoS(t *testing.T) {
	n1, n2 := twoNodes(t)
	egress := float64(traffic.Rate(10_000_000))
	qosConf := map[string]any{"qos": map[string]any{"dscp": 26, "egressRate": egress, "egressBurst": 100_000}}
	conf := n1.conf(t, "blue", 100, "10.66.0.0/24", "10.66.0.10", "10.66.0.19", qosConf)
	keep, stale := cnitest.NewPod(t), cnitest.NewPod(t)
	rk := n1.Add(t, plugin, conf, keep, "net1")
	n1.Add(t, plugin, conf, stale, "net1")
	remote := cnitest.NewPod(t)
	rr := n2.Add(t, plugin, n2.conf(t, "blue", 100, "10.66.0.0/24", "10.66.0.20", "10.66.0.29", nil), remote, "net1")

	sniff, err := traffic.Sniff(remote.NS, "net1")
	if err != nil {
		t.Fatal(err)
	}
	defer sniff.Close()
	if err := traffic.Ping(keep.NS, ip4(t, rr), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	got := sniff.WaitFor(func(p traffic.Packet) bool { return p.Src == ip4(t, rk) && p.Proto == 1 }, 1, 3*time.Second)
	if len(got) == 0 || got[0].DSCP != 26 {
		t.Errorf("ICMP from the QoS pod across the tunnel: %+v, want DSCP 26", got)
	}
	// Shaped on the host end, which drops what overflows the shaper's
	// queue as a network would: measured after TCP's first second.
	res, err := traffic.IPerf3{Client: keep.NS, Server: remote.NS, Addr: ip4(t, rr), Port: 7003,
		Duration: 2 * time.Second, Omit: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if rate := res.ReceivedBps; res.Error != "" || rate < 0.8*egress || rate > 1.2*egress {
		t.Errorf("egress over the tunnel %.2f Mbit/s (%s), configured %.0f", rate/1e6, res.Error, egress/1e6)
	}

	if err := n1.GC(t, plugin, conf, keep.Attachment("net1")); err != nil {
		t.Fatal(err)
	}
	if stale.NS.HasLink(t, "net1") {
		t.Error("GC left the stale pod's interface")
	}
	// The QoS of a VXLAN attachment is on the host end of its veth: GC
	// removes the stale one's there, and keeps the other's.
	staleIf, keepIf := bridgeport.HostVethName(stale.ID, "net1"), bridgeport.HostVethName(keep.ID, "net1")
	if n1.NS.HasLink(t, qosport.HostIFBName(staleIf)) || !n1.NS.HasLink(t, qosport.HostIFBName(keepIf)) {
		t.Error("GC must remove the stale attachment's egress IFB and only that one")
	}
	rules := n1.NS.Ruleset(t)
	if strings.Contains(rules, staleIf) || !strings.Contains(rules, keepIf) {
		t.Errorf("GC must remove the stale attachment's rules and only those:\n%s", rules)
	}
	if err := n1.Check(t, plugin, conf, rk, keep, "net1"); err != nil {
		t.Errorf("GC broke the attachment it had to keep: %v", err)
	}
}

func TestIPv6Underlay(t *testing.T) {
	a := &node{Host: cnitest.NewHost(t), addr: "fd50::1", dataDir: t.TempDir(), ipamDir: t.TempDir()}
	b := &node{Host: cnitest.NewHost(t), addr: "fd50::2", dataDir: t.TempDir(), ipamDir: t.TempDir()}
	nstest.Veth(t, a.NS, "under0", "fd50::1/64", b.NS, "under0", "fd50::2/64")
	extra := func(remote string) map[string]any {
		return map[string]any{"local": nil, "remotes": []string{remote}}
	}
	ca := a.conf(t, "blue", 500, "10.67.0.0/24", "10.67.0.10", "10.67.0.19", extra("fd50::2"))
	cb := b.conf(t, "blue", 500, "10.67.0.0/24", "10.67.0.20", "10.67.0.29", extra("fd50::1"))
	p, q := cnitest.NewPod(t), cnitest.NewPod(t)
	a.Add(t, plugin, ca, p, "net1")
	rq := b.Add(t, plugin, cb, q, "net1")
	if got := p.NS.Link(t, "net1").Attrs().MTU; got != 1430 {
		t.Errorf("pod MTU %d over an IPv6 underlay, want 1500 - 70", got)
	}
	if err := traffic.Ping(p.NS, ip4(t, rq), 10*time.Second); err != nil {
		t.Errorf("across an IPv6 underlay: %v", err)
	}
}
