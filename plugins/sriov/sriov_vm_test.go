//go:build vmtest

package sriov

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/vm/guest"
)

// netdevsimRig is a rig whose PF is a real netdevsim PF with vfs VFs, moved
// into the host namespace: the plugin configures the VFs through the
// kernel's driver. netdevsim VFs have no netdev or PCI entries, so the fake
// sysfs tree lists the PF under its real name and stand-in links as the
// VFs' netdevs.
func netdevsimRig(t *testing.T, vfs int) *rig {
	t.Helper()
	guest.Require(t, guest.NetdevsimSRIOV)
	r := emptyRig(t, nil)
	pf := guest.Netdevsim(t, vfs) // after the host namespace: deleted before it
	l, err := netlink.LinkByName(pf.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(l, r.h.NS.Fd(t)); err != nil {
		t.Fatalf("move PF %s into the host namespace: %v", pf.Name, err)
	}
	r.addPF(t, pf.Name, vfs)
	return r
}

// ipVF is one VF as `ip -j link show <pf>` reports it.
type ipVF struct {
	VF      int    `json:"vf"`
	Address string `json:"address"`
	VLANs   []struct {
		VLAN     int    `json:"vlan"`
		QoS      int    `json:"qos"`
		Protocol string `json:"protocol"`
	} `json:"vlan_list"`
	Rate struct {
		Max int `json:"max_tx"`
		Min int `json:"min_tx"`
	} `json:"rate"`
	SpoofChk  bool   `json:"spoofchk"`
	LinkState string `json:"link_state"`
	Trust     bool   `json:"trust"`
}

// ipLinkShow runs `ip link show <pf>` in the host namespace and returns its
// VF lines, and the VFs as its JSON form reports them.
func (r *rig) ipLinkShow(t *testing.T) ([]string, []ipVF) {
	t.Helper()
	text, err := exec.Command("ip", "-n", r.h.NS.Name, "link", "show", r.pf).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show %s: %v\n%s", r.pf, err, text)
	}
	var lines []string
	for _, l := range strings.Split(string(text), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "vf ") {
			lines = append(lines, l)
		}
	}
	out, err := exec.Command("ip", "-n", r.h.NS.Name, "-j", "link", "show", r.pf).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -j link show %s: %v\n%s", r.pf, err, out)
	}
	var links []struct {
		VFs []ipVF `json:"vfinfo_list"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link show %s: %v\n%s", r.pf, err, out)
	}
	return lines, links[0].VFs
}

func (r *rig) ipLink(t *testing.T, args ...string) {
	t.Helper()
	run(t, "ip", append([]string{"-n", r.h.NS.Name, "link", "set", r.pf}, args...)...)
}

// sameLines fails unless the VF lines of `ip link show` are as before.
func sameLines(t *testing.T, when string, before, after []string) {
	t.Helper()
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("%s, ip link show reads\n  %s\nwant, as before the ADD,\n  %s", when, strings.Join(after, "\n  "), strings.Join(before, "\n  "))
	}
}

func TestNetdevsimVFSettingsSetAndRestored(t *testing.T) {
	r := netdevsimRig(t, 4)
	// VF 1 starts with none of its settings at their defaults, so that
	// restoring defaults would not pass for restoring the originals.
	r.ipLink(t, "vf", "1", "mac", "02:00:00:00:0f:01", "vlan", "7", "qos", "1", "min_tx_rate", "5", "max_tx_rate", "50",
		"spoofchk", "on", "trust", "off", "state", "enable")
	before, _ := r.ipLinkShow(t)
	n := newNetwork(t, r, "10.50.0.0/24", allSettings)
	n["deviceID"] = vfAddr(1)
	conf := n.bytes(t)
	p := cnitest.NewPod(t)
	res := r.h.Add(t, pluginName, conf, p, "net1")

	lines, vfs := r.ipLinkShow(t)
	t.Logf("after ADD, ip link show %s:\n  %s", r.pf, strings.Join(lines, "\n  "))
	got := vfs[1]
	if got.Address != "02:00:00:00:10:01" || len(got.VLANs) != 1 || got.VLANs[0].VLAN != 100 || got.VLANs[0].QoS != 3 ||
		got.VLANs[0].Protocol != "802.1ad" || got.Rate.Min != 10 || got.Rate.Max != 100 || got.SpoofChk ||
		!got.Trust || got.LinkState != "disable" {
		t.Errorf("VF 1 after ADD: %+v; want mac 02:00:00:00:10:01, vlan 100 qos 3 802.1ad, rates 10/100, spoofchk off, trust on, state disable", got)
	}
	for _, i := range []int{0, 2, 3} {
		if lines[i] != before[i] {
			t.Errorf("VF %d changed: %q, was %q", i, lines[i], before[i])
		}
	}
	if mac := podLink(t, p, "net1").Attrs().HardwareAddr.String(); mac != "02:00:00:00:10:01" {
		t.Errorf("pod netdev MAC %s, want 02:00:00:00:10:01", mac)
	}
	if err := r.h.Check(t, pluginName, conf, res, p, "net1"); err != nil {
		t.Errorf("CHECK after ADD: %v", err)
	}
	for _, tamper := range [][]string{{"vlan", "100", "qos", "3"}, {"trust", "off"}, {"state", "auto"}, {"max_tx_rate", "90", "min_tx_rate", "10"}, {"mac", "02:00:00:00:10:02"}} {
		r.ipLink(t, append([]string{"vf", "1"}, tamper...)...)
		if err := r.h.Check(t, pluginName, conf, res, p, "net1"); err == nil || !strings.Contains(err.Error(), "VF "+vfAddr(1)) {
			t.Errorf("CHECK after `ip link set %s vf 1 %s`: %v; want an error naming the VF", r.pf, strings.Join(tamper, " "), err)
		}
		r.ipLink(t, "vf", "1", "mac", "02:00:00:00:10:01", "vlan", "100", "qos", "3", "proto", "802.1ad", "trust", "on",
			"state", "disable", "min_tx_rate", "10", "max_tx_rate", "100")
	}
	if err := r.h.Check(t, pluginName, conf, res, p, "net1"); err != nil {
		t.Errorf("CHECK with the settings put back: %v", err)
	}
	for i := range 2 {
		if err := r.h.Del(pluginName, conf, p, "net1"); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	after, _ := r.ipLinkShow(t)
	sameLines(t, "after DEL", before, after)
	r.hostVF(t, 1)
}

func TestNetdevsimOffloadedEgressRate(t *testing.T) {
	r := netdevsimRig(t, 2)
	before, _ := r.ipLinkShow(t)
	n := newNetwork(t, r, "10.51.0.0/24", map[string]any{"offloadEgressRate": true, "minTxRate": 3,
		"qos": map[string]any{"egressRate": 25_000_001, "egressBurst": 100000, "dscp": 10}})
	p := cnitest.NewPod(t)
	res := r.h.Add(t, pluginName, n.bytes(t), p, "net1")
	_, vfs := r.ipLinkShow(t)
	if vfs[0].Rate.Max != 26 || vfs[0].Rate.Min != 3 {
		t.Errorf("VF 0 rates min %d max %d Mbit/s; want 3 and 26 (25.000001 rounded up)", vfs[0].Rate.Min, vfs[0].Rate.Max)
	}
	qs, err := p.NS.Handle(t).QdiscList(podLink(t, p, "net1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Type() == "tbf" {
			t.Errorf("the offloaded egress rate is shaped by a tbf too: %+v", q)
		}
	}
	if err := r.h.Check(t, pluginName, n.bytes(t), res, p, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	r.ipLink(t, "vf", "0", "max_tx_rate", "100", "min_tx_rate", "3")
	if err := r.h.Check(t, pluginName, n.bytes(t), res, p, "net1"); err == nil || !strings.Contains(err.Error(), "max_tx_rate is 100, want 26") {
		t.Errorf("CHECK with max_tx_rate 100: %v", err)
	}
	if err := r.h.Del(pluginName, n.bytes(t), p, "net1"); err != nil {
		t.Fatal(err)
	}
	after, _ := r.ipLinkShow(t)
	sameLines(t, "after DEL", before, after)
}

// A failed ADD gives the VF its original settings back, through the driver.
func TestNetdevsimFailedAddRestoresTheVF(t *testing.T) {
	r := netdevsimRig(t, 2)
	r.ipLink(t, "vf", "0", "vlan", "9", "spoofchk", "on")
	before, _ := r.ipLinkShow(t)
	n := newNetwork(t, r, "10.52.0.0/24", allSettings)
	p := cnitest.NewPod(t)
	run(t, "ip", "-n", p.NS.Name, "link", "add", "net1", "type", "bridge") // the interface name is taken
	_, err := r.h.Exec(p.Call(pluginName, "ADD", "net1", n.bytes(t)))
	cniErr(t, err, types.ErrInternal, `rename link "ncvf`)
	if d := err.(*types.Error).Details; d != "" {
		t.Errorf("cleanup after the failure failed: %s", d)
	}
	after, _ := r.ipLinkShow(t)
	sameLines(t, "after the failed ADD", before, after)
	r.hostVF(t, 0)
	if len(records(t, n)) != 0 {
		t.Errorf("records left: %v", records(t, n))
	}
}

// GC gives a stale attachment's VF its settings back; 802.1Q VLAN here
// (which ip -j reports without a protocol).
func TestNetdevsimGCRestoresTheVF(t *testing.T) {
	r := netdevsimRig(t, 2)
	before, _ := r.ipLinkShow(t)
	n := newNetwork(t, r, "10.53.0.0/24", map[string]any{"vlan": 200, "vlanQoS": 5, "trust": "on"})
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	r.h.Add(t, pluginName, n.bytes(t), a, "net1")
	r.h.Add(t, pluginName, n.bytes(t), b, "net1")
	lines, vfs := r.ipLinkShow(t)
	for i := range 2 {
		if len(vfs[i].VLANs) != 1 || vfs[i].VLANs[0].VLAN != 200 || vfs[i].VLANs[0].QoS != 5 || vfs[i].VLANs[0].Protocol != "" || !vfs[i].Trust {
			t.Errorf("VF %d: %s; want vlan 200 qos 5 (802.1Q), trust on", i, lines[i])
		}
	}
	if err := r.h.GC(t, pluginName, n.bytes(t), b.Attachment("net1")); err != nil {
		t.Fatal(err)
	}
	after, _ := r.ipLinkShow(t)
	sameLines(t, "VF 0 after GC", before[:1], after[:1])
	if after[1] != lines[1] {
		t.Errorf("GC changed the valid attachment's VF 1: %s", after[1])
	}
	r.hostVF(t, 0)
}
