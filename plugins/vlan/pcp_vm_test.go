//go:build vmtest

package vlan

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// dualConf is conf with an IPv6 range too (fd71::/64) and the given extra keys.
func dualConf(t *testing.T, first int, extra map[string]any) []byte {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal(conf(t, 100, "10.75.0.0/24", ipOf("10.75.0.", first), ipOf("10.75.0.", first+9), extra), &c); err != nil {
		t.Fatal(err)
	}
	ipam := c["ipam"].(map[string]any)
	ipam["ranges"] = append(ipam["ranges"].([]any), []any{map[string]any{"subnet": "fd71::/64",
		"rangeStart": ipOf("fd71::", first), "rangeEnd": ipOf("fd71::", first+9)}})
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ipOf(prefix string, n int) string { return prefix + strconv.Itoa(n) }

// pcpCase is one datagram a pod sends and the PCP its frame must carry on
// the trunk.
type pcpCase struct {
	what string
	v6   bool
	port uint16
	tos  uint8 // what the pod sets itself
	pcp  uint8
}

// TestFramesOnTheTrunkCarryTheMappedPCP: frames leaving through VLAN 100's
// sub-interface carry the 802.1p priority their packet's DSCP maps to, for
// an attachment's dscp and for what pods mark themselves, IPv4 and IPv6:
// PCP = DSCP >> 3 by default, and what pcpMap says when it is set (a DSCP
// it leaves out gets 0). Both for the host's shared sub-interface behind the
// VLAN's bridge and for a sub-interface in the pod (linkInContainer).
// CHECK verifies the map; an ADD repairs a sub-interface that lost it.
func TestFramesOnTheTrunkCarryTheMappedPCP(t *testing.T) {
	for _, m := range []struct {
		name   string
		pcpMap map[string]any
		want   [3]uint8 // PCP of DSCP 46, 10 and 26
	}{
		{"default map", nil, [3]uint8{5, 1, 3}},
		{"configured map", map[string]any{"46": 6, "10": 2}, [3]uint8{6, 2, 0}},
	} {
		t.Run(m.name, func(t *testing.T) {
			extra := map[string]any{}
			if m.pcpMap != nil {
				extra["pcpMap"] = m.pcpMap
			}
			cases := []pcpCase{
				{"the attachment's dscp 46, IPv4", false, 7201, 0, m.want[0]},
				{"the pod's own dscp 10, IPv4", false, 7202, 10 << 2, m.want[1]},
				{"the pod's own dscp 26, IPv6", true, 7203, 26<<2 | 2, m.want[2]},
			}
			h1, h2, sw := fabricWithSwitch(t)
			marked, plain, remote := cnitest.NewPod(t), cnitest.NewPod(t), cnitest.NewPod(t)
			markedConf := dualConf(t, 10, merge(extra, map[string]any{"qos": map[string]any{"dscp": 46}}))
			rm := h1.Add(t, plugin, markedConf, marked, "net1")
			h1.Add(t, plugin, dualConf(t, 20, extra), plain, "net1")
			rr := h2.Add(t, plugin, dualConf(t, 30, nil), remote, "net1")
			capturePCP(t, sw, "p1", rr, map[*cnitest.Pod][]pcpCase{marked: cases[:1], plain: cases[1:]})
			if err := h1.Check(t, plugin, markedConf, rm, marked, "net1"); err != nil {
				t.Errorf("CHECK: %v", err)
			}
			dev := (&netconf.VLAN{Master: "eth1", VLANID: 100}).DeviceName()
			run(t, "ip", "netns", "exec", h1.NS.Name, "nft", "delete", "table", "netdev", nft.PCPTable(dev))
			run(t, "ip", "-n", h1.NS.Name, "link", "set", dev, "type", "vlan", "egress-qos-map", "1:0", "5:0", "6:0")
			if err := h1.Check(t, plugin, markedConf, rm, marked, "net1"); err == nil {
				t.Error("CHECK passed with the sub-interface's PCP table and map gone")
			}
			// The next ADD brings them back, as an upgrade brings an older
			// netclass's sub-interface to the map.
			h1.Add(t, plugin, dualConf(t, 40, extra), cnitest.NewPod(t), "net1")
			if err := h1.Check(t, plugin, markedConf, rm, marked, "net1"); err != nil {
				t.Errorf("CHECK after the repairing ADD: %v", err)
			}
			capturePCP(t, sw, "p1", rr, map[*cnitest.Pod][]pcpCase{marked: cases[:1]})
		})
		t.Run(m.name+", linkInContainer", func(t *testing.T) {
			extra := map[string]any{"linkInContainer": true}
			if m.pcpMap != nil {
				extra["pcpMap"] = m.pcpMap
			}
			_, h2, sw := fabricWithSwitch(t)
			h := cnitest.NewHost(t)
			p, remote := cnitest.NewPod(t), cnitest.NewPod(t)
			nstest.Veth(t, p.NS, "eth1", "", sw, "p3", "") // the master lives in the pod
			run(t, "ip", "-n", sw.Name, "link", "set", "p3", "master", "br0")
			run(t, "bridge", "-n", sw.Name, "vlan", "add", "dev", "p3", "vid", "100")
			c := dualConf(t, 50, merge(extra, map[string]any{"qos": map[string]any{"dscp": 46}}))
			res := h.Add(t, plugin, c, p, "net1")
			rr := h2.Add(t, plugin, dualConf(t, 30, nil), remote, "net1")
			capturePCP(t, sw, "p3", rr, map[*cnitest.Pod][]pcpCase{p: {
				{"the attachment's dscp 46 (marked in the pod), IPv4", false, 7211, 0, m.want[0]},
				{"the attachment's dscp 46 over the pod's 10, IPv6", true, 7212, 10 << 2, m.want[0]},
			}})
			if err := h.Check(t, plugin, c, res, p, "net1"); err != nil {
				t.Errorf("CHECK: %v", err)
			}
			run(t, "ip", "netns", "exec", p.NS.Name, "nft", "flush", "map", "netdev", nft.PCPTable("net1"), "pcp4")
			if err := h.Check(t, plugin, c, res, p, "net1"); err == nil {
				t.Error("CHECK passed with the pod's PCP map flushed")
			}
			if err := h.Del(plugin, c, p, "net1"); err != nil {
				t.Fatal(err)
			}
			out, _ := execOut("ip", "netns", "exec", p.NS.Name, "nft", "list", "tables")
			if strings.Contains(out, nft.PCPTable("net1")) {
				t.Errorf("DEL left the pod's PCP table:\n%s", out)
			}
		})
	}
}

// capturePCP sends each pod's datagrams to the remote pod and checks the
// 802.1p priority of their frames on the switch port.
func capturePCP(t *testing.T, sw *nstest.NS, port string, remote *current.Result, sends map[*cnitest.Pod][]pcpCase) {
	t.Helper()
	for p, cases := range sends { // neighbours resolved first
		for _, c := range cases {
			if err := traffic.Ping(p.NS, cnitest.Addr(t, remote, c.v6), 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	sniff, err := traffic.Sniff(sw, port)
	if err != nil {
		t.Fatal(err)
	}
	defer sniff.Close()
	for p, cases := range sends {
		for _, c := range cases {
			if err := traffic.SendUDP(p.NS, cnitest.Addr(t, remote, c.v6), c.port, c.tos, 3, 10*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			got := sniff.WaitFor(func(pk traffic.Packet) bool { return pk.DstPort == c.port }, 3, 3*time.Second)
			if len(got) == 0 {
				t.Errorf("%s: no frame to port %d on %s", c.what, c.port, port)
			}
			for _, pk := range got {
				if pk.VLAN == nil || pk.VLAN.ID != 100 || pk.VLAN.PCP != c.pcp {
					t.Errorf("%s: frame with tag %+v (DSCP %d), want VLAN 100 PCP %d", c.what, pk.VLAN, pk.DSCP, c.pcp)
				}
			}
		}
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range []map[string]any{a, b} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func execOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
