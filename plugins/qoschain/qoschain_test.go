package qoschain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/traffic"
)

var (
	egressBps  = float64(traffic.Rate(20_000_000))
	ingressBps = float64(traffic.Rate(10_000_000))
)

// qosBlock marks everything with DSCP 46, UDP/5353 with 34, and shapes both ways.
func qosBlock() map[string]any {
	return map[string]any{
		"dscp": 46, "egressRate": egressBps, "egressBurst": 100_000, "ingressRate": ingressBps, "ingressBurst": 100_000,
		"egress": []any{map[string]any{"priority": 1, "dscp": 34,
			"classifier": map[string]any{"ports": []any{map[string]any{"protocol": "UDP", "port": 5353}}}}},
	}
}

// chain returns a conflist: the main plugin, then netclass-qos with qosBlock when withQoS.
func chain(t *testing.T, name string, main map[string]any, withQoS bool) *libcni.NetworkConfigList {
	t.Helper()
	plugins := []any{main}
	if withQoS {
		plugins = append(plugins, map[string]any{"type": "netclass-qos", "dataDir": t.TempDir(), "qos": qosBlock()})
	}
	b, err := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": name, "plugins": plugins})
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func rt(p *cnitest.Pod, ifname string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.ID, NetNS: p.NS.Path, IfName: ifname}
}

func addList(t *testing.T, h *cnitest.Host, cni *libcni.CNIConfig, list *libcni.NetworkConfigList, p *cnitest.Pod) *current.Result {
	t.Helper()
	var res types.Result
	h.Do(t, func(ctx context.Context) (err error) {
		res, err = cni.AddNetworkList(ctx, list, rt(p, "net1"))
		return err
	})
	r, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ipOf(t *testing.T, r *current.Result) netip.Addr {
	t.Helper()
	for _, ipc := range r.IPs {
		if a, ok := netip.AddrFromSlice(ipc.Address.IP.To4()); ok {
			return a
		}
	}
	t.Fatalf("no IPv4 address in %v", r.IPs)
	return netip.Addr{}
}

func ipam(t *testing.T, subnet string) map[string]any {
	return map[string]any{"type": "host-local", "dataDir": t.TempDir(), "ranges": []any{[]any{map[string]any{"subnet": subnet}}}}
}

func TestAfterUpstreamBridge(t *testing.T) {
	h := cnitest.NewHost(t)
	cni := h.CNI(t)
	ip := ipam(t, "10.30.0.0/24")
	main := map[string]any{"type": "bridge", "bridge": "up0", "isGateway": true, "ipam": ip}
	marked, plain := chain(t, "up", main, true), chain(t, "up", main, false)
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	ra := addList(t, h, cni, marked, a)
	rb := addList(t, h, cni, plain, b)
	exerciseQoS(t, a, b, ipOf(t, ra), ipOf(t, rb))
	// A veth in a bridge: everything is on the host end, nothing in the pod.
	hostIf := hostEnd(t, ra)
	if a.NS.HasLink(t, qosport.IFBName("net1")) {
		t.Error("an IFB was created in the pod for a veth attachment")
	}
	if out := podQoSState(t, a); out != "" {
		t.Errorf("QoS state in the pod of a bridged veth:\n%s", out)
	}
	if !h.NS.HasLink(t, qosport.HostIFBName(hostIf)) {
		t.Errorf("no egress IFB %s on the host", qosport.HostIFBName(hostIf))
	}
	lifecycle(t, h, cni, marked, a, []string{"ip", "netns", "exec", h.NS.Name, "nft", "flush", "chain", "bridge", nft.PortQoSTable, nft.PortChain(hostIf)})
	if h.NS.HasLink(t, qosport.HostIFBName(hostIf)) {
		t.Error("DEL left the host's egress IFB")
	}
	if out := h.NS.Ruleset(t); strings.Contains(out, hostIf) {
		t.Errorf("DEL left the port's rules:\n%s", out)
	}
}

// hostEnd is the host-side interface of an upstream bridge result.
func hostEnd(t *testing.T, r *current.Result) string {
	t.Helper()
	for _, i := range r.Interfaces {
		if i.Sandbox == "" && strings.HasPrefix(i.Name, "veth") {
			return i.Name
		}
	}
	t.Fatalf("no host veth in %v", r.Interfaces)
	return ""
}

// podQoSState lists the nftables tables and the qdiscs other than the
// defaults the pod's namespace holds.
func podQoSState(t *testing.T, p *cnitest.Pod) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", p.NS.Name, "sh", "-c",
		"nft list tables; tc qdisc show | grep -v -e 'qdisc noqueue' -e 'qdisc noop' || true").CombinedOutput()
	if err != nil {
		t.Fatalf("list the pod's QoS state: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestAfterUpstreamMacvlan(t *testing.T) {
	h := cnitest.NewHost(t)
	peer := cnitest.NewPod(t) // the other end of the master link
	run(t, "ip", "-n", h.NS.Name, "link", "add", "uplink0", "type", "veth", "peer", "name", "uplink0", "netns", peer.NS.Name)
	run(t, "ip", "-n", h.NS.Name, "link", "set", "uplink0", "up")
	run(t, "ip", "-n", peer.NS.Name, "link", "set", "uplink0", "up")
	cni := h.CNI(t)
	ip := ipam(t, "10.31.0.0/24")
	main := map[string]any{"type": "macvlan", "master": "uplink0", "mode": "bridge", "ipam": ip}
	marked, plain := chain(t, "mv", main, true), chain(t, "mv", main, false)
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	ra := addList(t, h, cni, marked, a)
	rb := addList(t, h, cni, plain, b)
	exerciseQoS(t, a, b, ipOf(t, ra), ipOf(t, rb))
	if !a.NS.HasLink(t, qosport.IFBName("net1")) {
		t.Error("a macvlan attachment's ingress needs an IFB in the pod")
	}
	lifecycle(t, h, cni, marked, a, []string{"ip", "netns", "exec", a.NS.Name, "nft", "flush", "chain", "netdev", nft.PodQoSTable("net1"), "egress"})
	if a.NS.HasLink(t, qosport.IFBName("net1")) {
		t.Error("DEL left the IFB")
	}
}

// exerciseQoS proves marking and shaping from pod a (with QoS) to pod b.
func exerciseQoS(t *testing.T, a, b *cnitest.Pod, aIP, bIP netip.Addr) {
	t.Helper()
	if err := traffic.Ping(a.NS, bIP, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	sniff, err := traffic.Sniff(b.NS, "net1")
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []uint16{5353, 9999} {
		a.NS.Do(t, func() error {
			c, err := net.Dial("udp", netip.AddrPortFrom(bIP, port).String())
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("x"))
			return err
		})
	}
	for port, want := range map[uint16]uint8{5353: 34, 9999: 46} {
		got := sniff.WaitFor(func(p traffic.Packet) bool { return p.Dst == bIP && p.DstPort == port }, 1, 3*time.Second)
		if len(got) == 0 || got[0].DSCP != want {
			t.Errorf("UDP/%d: packets %+v, want DSCP %d", port, got, want)
		}
	}
	sniff.Close()
	// A veth's egress is shaped on its host end, which drops what
	// overflows the shaper's queue as a network would: measured after
	// TCP's first second.
	res, err := traffic.IPerf3{Client: a.NS, Server: b.NS, Addr: bIP, Port: 7001, Duration: 2 * time.Second, Omit: time.Second}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != "" {
		t.Fatalf("egress: %s", res.Error)
	}
	out := res.ReceivedBps
	in, err := traffic.TCPRate(b.NS, a.NS, aIP, 7002, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("egress %.2f Mbit/s (configured %.0f), ingress %.2f Mbit/s (configured %.0f)", out/1e6, egressBps/1e6, in/1e6, ingressBps/1e6)
	if math.Abs(out-egressBps) > 0.2*egressBps {
		t.Errorf("egress %.2f Mbit/s, configured %.0f", out/1e6, egressBps/1e6)
	}
	if math.Abs(in-ingressBps) > 0.2*ingressBps {
		t.Errorf("ingress %.2f Mbit/s, configured %.0f", in/1e6, ingressBps/1e6)
	}
}

// lifecycle: CHECK passes, fails once tamper (a command) removed rules,
// DEL twice succeeds and leaves no table in the pod.
func lifecycle(t *testing.T, h *cnitest.Host, cni *libcni.CNIConfig, list *libcni.NetworkConfigList, p *cnitest.Pod, tamper []string) {
	t.Helper()
	h.Do(t, func(ctx context.Context) error { return cni.CheckNetworkList(ctx, list, rt(p, "net1")) })
	run(t, tamper[0], tamper[1:]...)
	h.NS.Do(t, func() error {
		if err := cni.CheckNetworkList(context.Background(), list, rt(p, "net1")); err == nil {
			return fmt.Errorf("CHECK passed with the rules flushed")
		}
		return nil
	})
	for range 2 {
		h.Do(t, func(ctx context.Context) error { return cni.DelNetworkList(ctx, list, rt(p, "net1")) })
	}
	if out := p.NS.Ruleset(t); out != "" {
		t.Errorf("DEL left nftables state: %s", out)
	}
}

func TestGCRemovesStaleQoS(t *testing.T) {
	h := cnitest.NewHost(t)
	peer := cnitest.NewPod(t)
	run(t, "ip", "-n", h.NS.Name, "link", "add", "uplink0", "type", "veth", "peer", "name", "uplink0", "netns", peer.NS.Name)
	run(t, "ip", "-n", h.NS.Name, "link", "set", "uplink0", "up")
	cni := h.CNI(t)
	list := chain(t, "mv", map[string]any{"type": "macvlan", "master": "uplink0", "mode": "bridge", "ipam": ipam(t, "10.32.0.0/24")}, true)
	keep, stale := cnitest.NewPod(t), cnitest.NewPod(t)
	addList(t, h, cni, list, keep)
	addList(t, h, cni, list, stale)
	h.Do(t, func(ctx context.Context) error {
		return cni.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{keep.Attachment("net1")}})
	})
	if stale.NS.HasLink(t, qosport.IFBName("net1")) {
		t.Error("GC left the stale attachment's IFB")
	}
	if out := stale.NS.Ruleset(t); out != "" {
		t.Errorf("GC left the stale attachment's rules: %s", out)
	}
	h.Do(t, func(ctx context.Context) error { return cni.CheckNetworkList(ctx, list, rt(keep, "net1")) })
}

func TestNeedsPrevResult(t *testing.T) {
	h := cnitest.NewHost(t)
	p := cnitest.NewPod(t)
	conf := []byte(`{"cniVersion":"1.1.0","name":"q","type":"netclass-qos","qos":{"dscp":1}}`)
	_, err := h.Exec(p.Call("netclass-qos", "ADD", "net1", conf))
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrInvalidNetworkConfig {
		t.Fatalf("ADD without prevResult: %v, want CNI error 7", err)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// After the upstream bridge, the QoS is on the host end of the veth. When
// the pod's namespace (and with it the veth) is gone before any DEL, GC
// still removes the host-side state by the recorded host end's name.
func TestGCAfterThePodWentAway(t *testing.T) {
	h := cnitest.NewHost(t)
	cni := h.CNI(t)
	list := chain(t, "up", map[string]any{"type": "bridge", "bridge": "up1", "ipam": ipam(t, "10.34.0.0/24")}, true)
	gone, keep := cnitest.NewPod(t), cnitest.NewPod(t)
	hostIf := hostEnd(t, addList(t, h, cni, list, gone))
	keepIf := hostEnd(t, addList(t, h, cni, list, keep))
	if !h.NS.HasLink(t, qosport.HostIFBName(hostIf)) {
		t.Fatalf("no egress IFB for %s", hostIf)
	}
	if err := gone.NS.Delete(); err != nil {
		t.Fatal(err)
	}
	h.Do(t, func(ctx context.Context) error {
		return cni.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{keep.Attachment("net1")}})
	})
	if h.NS.HasLink(t, qosport.HostIFBName(hostIf)) {
		t.Error("GC left the egress IFB of an attachment whose pod is gone")
	}
	if out := h.NS.Ruleset(t); strings.Contains(out, hostIf) {
		t.Errorf("GC left the rules of %s:\n%s", hostIf, out)
	} else if !strings.Contains(out, keepIf) || !h.NS.HasLink(t, qosport.HostIFBName(keepIf)) {
		t.Errorf("GC removed the QoS of the attachment it had to keep:\n%s", out)
	}
}

// The record netclass-qos keeps holds the attachment's addresses from the
// previous result (netclass-dra reads a Multus attachment's own addresses
// from it).
func TestTheRecordHoldsTheAddresses(t *testing.T) {
	h := cnitest.NewHost(t)
	cni := h.CNI(t)
	dataDir := t.TempDir()
	b, err := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "rec", "plugins": []any{
		map[string]any{"type": "bridge", "bridge": "rec0", "ipam": ipam(t, "10.31.0.0/24")},
		map[string]any{"type": "netclass-qos", "dataDir": dataDir, "qos": qosBlock()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	a := cnitest.NewPod(t)
	res := addList(t, h, cni, list, a)
	t.Cleanup(func() {
		h.Do(t, func(ctx context.Context) error { return cni.DelNetworkList(ctx, list, rt(a, "net1")) })
	})
	rec, err := attach.Store{Dir: dataDir}.Get("rec", a.ID, "net1")
	if err != nil || rec == nil {
		t.Fatalf("record of rec/%s/net1: %+v, %v", a.ID, rec, err)
	}
	if len(res.IPs) != 1 || len(rec.Addresses) != 1 || rec.Addresses[0] != res.IPs[0].Address.String() {
		t.Fatalf("the record holds addresses %v, the result %v", rec.Addresses, res.IPs)
	}
}
