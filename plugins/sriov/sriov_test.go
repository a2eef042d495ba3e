package sriov

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/traffic"
)

func TestAddMovesAFreeVFInAndDelPutsItBack(t *testing.T) {
	r := newRig(t, "pf0", 3, nil)
	n := newNetwork(t, r, "10.30.0.0/24", map[string]any{"mtu": 1300})
	run(t, "ip", "-n", r.wire.Name, "addr", "add", "10.30.0.254/24", "dev", "wire0")
	conf := n.bytes(t)
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)

	ra := r.h.Add(t, pluginName, conf, a, "net1")
	ifa := resultIf(t, ra)
	if ifa.Name != "net1" || ifa.Sandbox != a.NS.Path || ifa.PciID != vfAddr(0) || ifa.Mtu != 1300 {
		t.Errorf("result interface %+v, want net1 in %s with pciID %s and mtu 1300", ifa, a.NS.Path, vfAddr(0))
	}
	if r.h.NS.HasLink(t, "vf0") {
		t.Error("vf0 is still on the host")
	}
	l := podLink(t, a, "net1")
	if l.Attrs().HardwareAddr.String() != vfMAC(0) || l.Attrs().MTU != 1300 || ifa.Mac != vfMAC(0) {
		t.Errorf("pod's net1: MAC %s (result %s) MTU %d; want the VF's MAC %s and MTU 1300", l.Attrs().HardwareAddr, ifa.Mac, l.Attrs().MTU, vfMAC(0))
	}
	if err := traffic.Ping(a.NS, netip.MustParseAddr("10.30.0.254"), 5*time.Second); err != nil {
		t.Errorf("pod a -> the network behind its VF: %v", err)
	}
	rec, err := attach.Store{Dir: n["dataDir"].(string)}.Get(n["name"].(string), a.ID, "net1")
	var got []string
	if rec != nil {
		got = rec.Addresses
	}
	if err != nil || len(ra.IPs) != 1 || !slices.Equal(got, []string{ra.IPs[0].Address.String()}) {
		t.Errorf("the record holds addresses %v (%v), the result %v", got, err, ra.IPs)
	}
	rb := r.h.Add(t, pluginName, conf, b, "net1")
	if got := resultIf(t, rb).PciID; got != vfAddr(1) {
		t.Errorf("second pod got VF %s, want the next free one %s", got, vfAddr(1))
	}
	if err := r.h.Check(t, pluginName, conf, ra, a, "net1"); err != nil {
		t.Errorf("CHECK after ADD: %v", err)
	}
	for i := range 2 {
		if err := r.h.Del(pluginName, conf, a, "net1"); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	if a.NS.HasLink(t, "net1") {
		t.Error("net1 is still in the pod after DEL")
	}
	r.hostVF(t, 0)
	if allocated(n, firstIP(t, ra)) {
		t.Errorf("address %s is still allocated after DEL", firstIP(t, ra))
	}
	c := cnitest.NewPod(t)
	if got := resultIf(t, r.h.Add(t, pluginName, conf, c, "eth7")).PciID; got != vfAddr(0) {
		t.Errorf("after DEL, the next pod got VF %s, want the freed %s", got, vfAddr(0))
	}
}

func TestDeviceIDAndRuntimeDeviceID(t *testing.T) {
	r := newRig(t, "pf0", 3, nil)
	p, q := cnitest.NewPod(t), cnitest.NewPod(t)
	byConf := newNetwork(t, r, "10.31.0.0/24", map[string]any{"deviceID": strings.ToUpper(vfAddr(2))})
	delete(byConf, "master")
	if got := resultIf(t, r.h.Add(t, pluginName, byConf.bytes(t), p, "net1")).PciID; got != vfAddr(2) {
		t.Errorf("deviceID %s: got VF %s", vfAddr(2), got)
	}
	byRuntime := newNetwork(t, r, "10.31.1.0/24", map[string]any{"runtimeConfig": map[string]any{"deviceID": vfAddr(1)}})
	byRuntime["dataDir"] = byConf["dataDir"]
	if got := resultIf(t, r.h.Add(t, pluginName, byRuntime.bytes(t), q, "net1")).PciID; got != vfAddr(1) {
		t.Errorf("runtimeConfig.deviceID %s: got VF %s", vfAddr(1), got)
	}
	_, err := r.h.Exec(cnitest.NewPod(t).Call(pluginName, "ADD", "net1", byConf.bytes(t)))
	cniErr(t, err, types.ErrInvalidNetworkConfig, "deviceID: VF "+vfAddr(2)+" is in use by "+p.ID+"/net1")
}

func TestUserspaceVF(t *testing.T) {
	r := newRig(t, "pf0", 1, nil)
	r.addUserspaceVF(1)
	n := newNetwork(t, r, "10.32.0.0/24", map[string]any{"deviceID": vfAddr(1)})
	p := cnitest.NewPod(t)
	res := r.h.Add(t, pluginName, n.bytes(t), p, "net1")
	if i := resultIf(t, res); i.PciID != vfAddr(1) || i.Sandbox != p.NS.Path || len(res.IPs) != 1 || *res.IPs[0].Interface != 0 {
		t.Errorf("result %+v (interface %+v): want the VF's PCI address, the pod and IPAM's address", res, i)
	}
	if p.NS.HasLink(t, "net1") {
		t.Error("a userspace VF got a netdev in the pod")
	}
	if err := r.h.Check(t, pluginName, n.bytes(t), res, p, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	// The master picks kernel VFs only: vf0 is the one free.
	m := newNetwork(t, r, "10.32.1.0/24", nil)
	m["dataDir"] = n["dataDir"]
	if got := resultIf(t, r.h.Add(t, pluginName, m.bytes(t), cnitest.NewPod(t), "net1")).PciID; got != vfAddr(0) {
		t.Errorf("master selection took %s, want the kernel VF %s", got, vfAddr(0))
	}
	if err := r.h.Del(pluginName, n.bytes(t), p, "net1"); err != nil {
		t.Fatal(err)
	}
	if len(records(t, n)) != 1 {
		t.Errorf("records after DEL: %v, want only the kernel VF's", records(t, n))
	}
	for key, val := range map[string]any{"mtu": 9000, "qos": map[string]any{"dscp": 10}} {
		bad := newNetwork(t, r, "10.32.2.0/24", map[string]any{"deviceID": vfAddr(1), key: val})
		_, err := r.h.Exec(cnitest.NewPod(t).Call(pluginName, "ADD", "net1", bad.bytes(t)))
		cniErr(t, err, types.ErrInvalidNetworkConfig, key+": VF "+vfAddr(1)+" is bound to vfio-pci")
		if len(records(t, bad)) != 0 {
			t.Errorf("%s: failed ADD left records %v", key, records(t, bad))
		}
	}
}

func TestAddErrors(t *testing.T) {
	r := newRig(t, "pf0", 2, nil)
	r.tree.AddPF("pf1", "0000:04:00.0", 8) // SR-IOV, no VFs
	r.tree.AddPF("eth5", "0000:05:00.0", 0)
	r.tree.Remove(r.tree.Device("0000:05:00.0") + "/sriov_totalvfs")
	busy := newNetwork(t, r, "10.33.0.0/24", nil)
	for range 2 {
		r.h.Add(t, pluginName, busy.bytes(t), cnitest.NewPod(t), "net1")
	}
	tests := []struct {
		name  string
		extra map[string]any
		code  uint
		want  string
	}{
		{"deviceID names a PF", map[string]any{"deviceID": pfAddr, "master": nil}, types.ErrInvalidNetworkConfig, "deviceID: " + pfAddr + " is not a VF of any PF"},
		{"deviceID names nothing", map[string]any{"deviceID": "0000:03:00.7", "master": nil}, types.ErrInvalidNetworkConfig, "deviceID: no PCI device 0000:03:00.7"},
		{"deviceID of another master", map[string]any{"deviceID": vfAddr(0), "master": "pf1"}, types.ErrInvalidNetworkConfig, `deviceID: ` + vfAddr(0) + ` is a VF of "pf0", not of master "pf1"`},
		{"master missing", map[string]any{"master": "nope0"}, types.ErrInvalidNetworkConfig, `master: no network device "nope0"`},
		{"master is no PF", map[string]any{"master": "eth5"}, types.ErrInvalidNetworkConfig, `master: "eth5" is not an SR-IOV PF`},
		{"master without VFs", map[string]any{"master": "pf1"}, types.ErrInvalidNetworkConfig, `master: PF "pf1" has no VFs enabled`},
		{"every VF taken", map[string]any{"dataDir": busy["dataDir"]}, types.ErrTryAgainLater, `master: no free VF on "pf0": 2 VFs, 2 attached`},
		{"invalid field", map[string]any{"vlan": 4095}, types.ErrInvalidNetworkConfig, "vlan: must be between 0 and 4094"},
		{"bad mac from the runtime", map[string]any{"runtimeConfig": map[string]any{"mac": "nope"}}, types.ErrInvalidNetworkConfig, "runtimeConfig.mac: not a MAC address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNetwork(t, r, "10.33.1.0/24", tc.extra)
			for k, v := range tc.extra {
				if v == nil {
					delete(n, k)
				}
			}
			_, err := r.h.Exec(cnitest.NewPod(t).Call(pluginName, "ADD", "net1", n.bytes(t)))
			cniErr(t, err, tc.code, tc.want)
			if len(records(t, n)) != 0 && n["dataDir"] != busy["dataDir"] {
				t.Errorf("failed ADD left records %v", records(t, n))
			}
		})
	}
	gone := cnitest.NewPod(t).Call(pluginName, "ADD", "net1", newNetwork(t, r, "10.33.2.0/24", nil).bytes(t))
	gone.NetNS = "/var/run/netns/nct-does-not-exist"
	_, err := r.h.Exec(gone)
	cniErr(t, err, types.ErrInvalidNetNS, gone.NetNS)
}

func TestFailedAddLeavesNothing(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, r *rig, conf []byte, p *cnitest.Pod)
		want    string
	}{
		{"interface name taken in the pod", func(t *testing.T, r *rig, conf []byte, p *cnitest.Pod) {
			run(t, "ip", "-n", p.NS.Name, "link", "add", "net1", "type", "bridge")
		}, "rename link"},
		{"addresses exhausted", func(t *testing.T, r *rig, conf []byte, p *cnitest.Pod) {
			r.h.Add(t, pluginName, conf, cnitest.NewPod(t), "net1") // the /30's one address
		}, "no IP addresses available"},
		{"qos cannot be applied", func(t *testing.T, r *rig, conf []byte, p *cnitest.Pod) {
			// The IFB's name is taken in the pod by a link that is no IFB.
			run(t, "ip", "-n", p.NS.Name, "link", "add", qosport.IFBName("net1"), "type", "bridge")
		}, "not an ifb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "pf0", 3, nil)
			n := newNetwork(t, r, "10.34.0.0/30", map[string]any{"qos": map[string]any{"ingressRate": 1000000, "ingressBurst": 10000}})
			conf := n.bytes(t)
			p := cnitest.NewPod(t)
			tc.prepare(t, r, conf, p)
			before := records(t, n)
			_, err := r.h.Exec(p.Call(pluginName, "ADD", "net1", conf))
			var e *types.Error
			if err == nil || !errors.As(err, &e) || !strings.Contains(e.Msg, tc.want) {
				t.Fatalf("ADD error = %v, want a CNI error containing %q", err, tc.want)
			}
			if e.Details != "" {
				t.Errorf("cleanup after the failure failed: %s", e.Details)
			}
			if got := records(t, n); len(got) != len(before) {
				t.Errorf("records %v after the failed ADD, %v before", got, before)
			}
			r.hostVF(t, len(before))
		})
	}
}

func TestCheckNoticesChanges(t *testing.T) {
	qosConf := map[string]any{
		"egressRate": 20000000, "egressBurst": 200000, "ingressRate": 10000000, "ingressBurst": 100000, "dscp": 46,
	}
	tests := []struct {
		name    string
		offload bool
		tamper  func(t *testing.T, p *cnitest.Pod)
	}{
		{"address removed", false, func(t *testing.T, p *cnitest.Pod) { run(t, "ip", "-n", p.NS.Name, "addr", "flush", "dev", "net1") }},
		{"route removed", false, func(t *testing.T, p *cnitest.Pod) {
			run(t, "ip", "-n", p.NS.Name, "route", "del", "10.35.9.0/24")
		}},
		{"link down", false, func(t *testing.T, p *cnitest.Pod) { run(t, "ip", "-n", p.NS.Name, "link", "set", "net1", "down") }},
		{"mac changed", false, func(t *testing.T, p *cnitest.Pod) {
			run(t, "ip", "-n", p.NS.Name, "link", "set", "net1", "address", "02:00:00:00:99:99")
		}},
		{"mtu changed", false, func(t *testing.T, p *cnitest.Pod) {
			run(t, "ip", "-n", p.NS.Name, "link", "set", "net1", "mtu", "1280")
		}},
		{"egress qdisc removed", false, func(t *testing.T, p *cnitest.Pod) {
			run(t, "ip", "netns", "exec", p.NS.Name, "tc", "qdisc", "del", "dev", "net1", "root")
		}},
		{"ingress ifb removed", false, func(t *testing.T, p *cnitest.Pod) {
			run(t, "ip", "-n", p.NS.Name, "link", "del", qosport.IFBName("net1"))
		}},
		{"dscp rules removed", false, func(t *testing.T, p *cnitest.Pod) {
			run(t, "ip", "netns", "exec", p.NS.Name, "nft", "delete", "table", "netdev", "netclass_net1")
		}},
		{"offloaded egress shaped by a qdisc too", true, func(t *testing.T, p *cnitest.Pod) {
			run(t, "ip", "netns", "exec", p.NS.Name, "tc", "qdisc", "add", "dev", "net1", "root", "tbf", "rate", "1mbit", "burst", "10kb", "latency", "25ms")
		}},
		{"pod link deleted", false, func(t *testing.T, p *cnitest.Pod) { run(t, "ip", "-n", p.NS.Name, "link", "del", "net1") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var fake *fakeVFs
			if tc.offload {
				f := fakeFile(t, nil, "")
				fake = &f
			}
			r := newRig(t, "pf0", 1, fake)
			n := newNetwork(t, r, "10.35.0.0/24", map[string]any{"mtu": 1350, "qos": qosConf, "offloadEgressRate": tc.offload})
			n["ipam"].(map[string]any)["routes"] = []any{map[string]any{"dst": "10.35.9.0/24"}}
			conf := n.bytes(t)
			p := cnitest.NewPod(t)
			res := r.h.Add(t, pluginName, conf, p, "net1")
			if err := r.h.Check(t, pluginName, conf, res, p, "net1"); err != nil {
				t.Fatalf("CHECK before tampering: %v", err)
			}
			tc.tamper(t, p)
			if err := r.h.Check(t, pluginName, conf, res, p, "net1"); err == nil {
				t.Fatal("CHECK passed after tampering")
			}
		})
	}
}

func TestGCGivesBackStaleVFs(t *testing.T) {
	r := newRig(t, "pf0", 2, nil)
	n := newNetwork(t, r, "10.36.0.0/24", map[string]any{"qos": map[string]any{"dscp": 8, "ingressRate": 8000000, "ingressBurst": 80000}})
	conf := n.bytes(t)
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	ra := r.h.Add(t, pluginName, conf, a, "net1")
	r.h.Add(t, pluginName, conf, b, "net1")
	if err := r.h.GC(t, pluginName, conf, b.Attachment("net1")); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if a.NS.HasLink(t, "net1") || a.NS.HasLink(t, qosport.IFBName("net1")) {
		t.Error("GC left the stale attachment's VF or IFB in its pod")
	}
	r.hostVF(t, 0)
	if allocated(n, firstIP(t, ra)) {
		t.Error("GC left the stale attachment's address allocated")
	}
	if got := records(t, n); len(got) != 1 || !strings.HasPrefix(got[0], b.ID) {
		t.Errorf("records after GC: %v, want only %s's", got, b.ID)
	}
	if !b.NS.HasLink(t, "net1") {
		t.Error("GC took the valid attachment's VF")
	}
}

// A pod namespace that goes away gives a VF's netdev back to the host under
// its pod name (or the kernel's dev<N>): DEL finds it through sysfs and puts
// its name, MTU, MAC, alias and state back.
func TestDelAfterThePodNamespaceWentAway(t *testing.T) {
	r := newRig(t, "pf0", 1, nil)
	n := newNetwork(t, r, "10.37.0.0/24", map[string]any{"qos": map[string]any{"egressRate": 8000000, "egressBurst": 80000}})
	conf := n.bytes(t)
	p := mortalPod(t)
	r.h.Add(t, pluginName, conf, p, "net1")
	// What the kernel does to a physical netdev when its namespace goes.
	run(t, "ip", "-n", p.NS.Name, "link", "set", "net1", "netns", r.h.NS.Name)
	r.tree.SetNetdevs(vfAddr(0), "net1")
	if err := p.NS.Delete(); err != nil {
		t.Fatal(err)
	}
	gone := p.Call(pluginName, "DEL", "net1", conf)
	gone.NetNS = ""
	for i := range 2 {
		if _, err := r.h.Exec(gone); err != nil {
			t.Fatalf("DEL #%d without a namespace: %v", i+1, err)
		}
	}
	r.hostVF(t, 0)
	if len(records(t, n)) != 0 {
		t.Errorf("records after DEL: %v", records(t, n))
	}
}

func TestDelOfNothing(t *testing.T) {
	r := newRig(t, "pf0", 1, nil)
	n := newNetwork(t, r, "10.38.0.0/24", nil)
	if err := r.h.Del(pluginName, n.bytes(t), cnitest.NewPod(t), "net1"); err != nil {
		t.Errorf("DEL of an attachment never added: %v", err)
	}
	r.hostVF(t, 0)
}

func TestStatus(t *testing.T) {
	r := newRig(t, "pf0", 1, nil)
	r.tree.AddPF("pf1", "0000:04:00.0", 8)
	status := func(extra map[string]any) error {
		n := newNetwork(t, r, "10.39.0.0/24", extra)
		for k, v := range extra {
			if v == nil {
				delete(n, k)
			}
		}
		_, err := r.h.Exec(cnitest.Call{Plugin: pluginName, Command: "STATUS", Conf: n.bytes(t)})
		return err
	}
	if err := status(nil); err != nil {
		t.Errorf("STATUS with master pf0: %v", err)
	}
	if err := status(map[string]any{"deviceID": vfAddr(0), "master": nil}); err != nil {
		t.Errorf("STATUS with deviceID %s: %v", vfAddr(0), err)
	}
	cniErr(t, status(map[string]any{"master": "pf1"}), attach.ErrPluginNotAvailable, `PF "pf1" has no VFs`)
	cniErr(t, status(map[string]any{"deviceID": vfAddr(5), "master": nil}), attach.ErrPluginNotAvailable, "no PCI device "+vfAddr(5))
	run(t, "ip", "-n", r.h.NS.Name, "link", "del", "pf0")
	cniErr(t, status(nil), attach.ErrPluginNotAvailable, `PF "pf0"`)
}

func TestParallelAddsTakeDistinctVFs(t *testing.T) {
	const vfs = 4
	r := newRig(t, "pf0", vfs, nil)
	conf := newNetwork(t, r, "10.40.0.0/24", nil).bytes(t)
	pods := make([]*cnitest.Pod, vfs+1)
	for i := range pods {
		pods[i] = cnitest.NewPod(t)
	}
	outs, errs := make([][]byte, len(pods)), make([]error, len(pods))
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() { outs[i], errs[i] = r.h.Exec(pods[i].Call(pluginName, "ADD", "net1", conf)) })
	}
	wg.Wait()
	seen, failed := map[string]bool{}, 0
	for i := range pods {
		if errs[i] != nil {
			cniErr(t, errs[i], types.ErrTryAgainLater, "no free VF")
			failed++
			continue
		}
		res, err := current.NewResult(outs[i])
		if err != nil {
			t.Fatal(err)
		}
		id := res.(*current.Result).Interfaces[0].PciID
		if seen[id] {
			t.Errorf("VF %s handed out twice", id)
		}
		seen[id] = true
	}
	if len(seen) != vfs || failed != 1 {
		t.Errorf("%d VFs handed out and %d ADDs refused; want %d and 1", len(seen), failed, vfs)
	}
}

// The MAC the runtime asks for goes to the VF (through the PF: the fake
// here) and to its netdev in the pod.
func TestMACFromTheRuntime(t *testing.T) {
	f := fakeFile(t, nil, "")
	r := newRig(t, "pf0", 1, &f)
	n := newNetwork(t, r, "10.41.0.0/24", map[string]any{"mac": "02:00:00:00:00:01", "runtimeConfig": map[string]any{"mac": "02:00:00:00:00:02"}})
	p := cnitest.NewPod(t)
	out, err := r.h.Exec(cnitest.Call{Plugin: pluginName, Command: "ADD", ContainerID: p.ID, NetNS: p.NS.Path, IfName: "net1",
		Args: "IgnoreUnknown=1;MAC=02:00:00:00:00:03", Conf: n.bytes(t)})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := current.NewResult(out)
	if got := res.(*current.Result).Interfaces[0].Mac; got != "02:00:00:00:00:02" {
		t.Errorf("pod MAC %s, want runtimeConfig.mac 02:00:00:00:00:02 (over CNI_ARGS and the static mac)", got)
	}
	if got := podLink(t, p, "net1").Attrs().HardwareAddr.String(); got != "02:00:00:00:00:02" {
		t.Errorf("net1 has MAC %s", got)
	}
	vf, _ := f.VF("pf0", 0)
	if vf.MAC != "02:00:00:00:00:02" {
		t.Errorf("VF's admin MAC %s, want 02:00:00:00:00:02", vf.MAC)
	}
	if err := r.h.Del(pluginName, n.bytes(t), p, "net1"); err != nil {
		t.Fatal(err)
	}
	if vf, _ := f.VF("pf0", 0); vf.MAC != "00:00:00:00:00:00" {
		t.Errorf("VF's admin MAC %s after DEL, want it restored to 00:00:00:00:00:00", vf.MAC)
	}
	r.hostVF(t, 0)
}

// DEL takes back the VF's netdev, whatever its name in the pod, and only
// it: a link of the pod's own that has the attachment's interface name stays.
func TestDelLeavesThePodsOwnLinks(t *testing.T) {
	r := newRig(t, "pf0", 1, nil)
	n := newNetwork(t, r, "10.46.0.0/24", nil)
	p := cnitest.NewPod(t)
	r.h.Add(t, pluginName, n.bytes(t), p, "net1")
	run(t, "ip", "-n", p.NS.Name, "link", "set", "net1", "down") // older kernels rename only links that are down
	run(t, "ip", "-n", p.NS.Name, "link", "set", "net1", "name", "moved")
	run(t, "ip", "-n", p.NS.Name, "link", "add", "net1", "type", "bridge")
	if err := r.h.Del(pluginName, n.bytes(t), p, "net1"); err != nil {
		t.Fatal(err)
	}
	if !p.NS.HasLink(t, "net1") {
		t.Error("DEL took the pod's own net1 for the VF")
	}
	if p.NS.HasLink(t, "moved") {
		t.Error("DEL left the VF renamed in the pod")
	}
	r.hostVF(t, 0)
}
