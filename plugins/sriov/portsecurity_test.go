package sriov

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// A VF has no host end: its guard is in the pod. With startClosed it
// passes nothing until opened (netclass-dra does, once the pod's policy is
// in place); CHECK verifies the guard; DEL takes it away with the VF.
func TestPortSecurityInThePod(t *testing.T) {
	r := newRig(t, "pf0", 2, nil)
	n := newNetwork(t, r, "10.33.0.0/24", map[string]any{"portSecurity": map[string]any{"spoofCheck": true, "startClosed": true}})
	run(t, "ip", "-n", r.wire.Name, "addr", "add", "10.33.0.254/24", "dev", "wire0")
	conf := n.bytes(t)
	p := cnitest.NewPod(t)
	res := r.h.Add(t, pluginName, conf, p, "net1")
	inPod := func(fn func(c *nftables.Conn) error) {
		t.Helper()
		if err := nft.InNamespace(p.NS.Path, fn); err != nil {
			t.Fatal(err)
		}
	}
	gateway := netip.MustParseAddr("10.33.0.254")
	if traffic.Ping(p.NS, gateway, time.Second) == nil {
		t.Fatal("a VF whose guard starts closed passed a ping")
	}
	inPod(func(c *nftables.Conn) error { _, err := nft.OpenPodGuard(c, "net1"); return err })
	if err := traffic.Ping(p.NS, gateway, 5*time.Second); err != nil {
		t.Fatalf("after the guard opened: %v", err)
	}
	if err := r.h.Check(t, pluginName, conf, res, p, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if err := r.h.Del(pluginName, conf, p, "net1"); err != nil {
		t.Fatal(err)
	}
	inPod(func(c *nftables.Conn) error {
		tables, err := c.ListTablesOfFamily(nftables.TableFamilyNetdev)
		for _, tb := range tables {
			if tb.Name == nft.PodGuardTable("net1") {
				t.Errorf("DEL left %s in the pod", tb.Name)
			}
		}
		return err
	})
}
