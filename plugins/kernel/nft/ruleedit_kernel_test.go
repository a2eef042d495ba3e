package nft

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/test/nstest"
)

// An edit that changes a rule of many ports at once, synced from their
// last plans in one transaction: every port reports the change, the
// kernel holds each new plan, and of each port's chains only the edited
// rule was sent again (the others keep their handles). Replacing rules by
// handle failed here: the transaction committed but its answers were not
// read (ruleEdit).
func TestRuleEditsOfManyPorts(t *testing.T) {
	host := nstest.New(t)
	host.Bridge(t, "br0")
	tcp := tcpPlan(hostRanges(netip.AddrFrom4([4]byte{10, 0, 0, 1})), 80)
	udp := tcpPlan(hostRanges(netip.AddrFrom4([4]byte{10, 0, 0, 1})), 80)
	udp.Ingress.Allow[0].Ports[0].Proto = 17
	const n = 100
	sync := func(conn *nftables.Conn, want, prev *netpol.Plan) {
		t.Helper()
		ports := map[string]HostPort{}
		for i := range n {
			ports[fmt.Sprint("x", i)] = HostPort{Bridge: "br0", MAC: net.HardwareAddr{2, 0, 0, 0, 0, byte(i)}, Plan: want, Prev: prev}
		}
		for h, r := range SyncHostPolicies(conn, ports) {
			if r.Err != nil || r.Changed != (want != prev) {
				t.Fatalf("port %s: changed %v, %v; want changed %v", h, r.Changed, r.Err, want != prev)
			}
		}
		for h, p := range ports {
			if err := CheckHostPolicy(conn, h, p); err != nil {
				t.Fatalf("port %s: %v", h, err)
			}
		}
	}
	err := InNamespace(host.Path, func(conn *nftables.Conn) error {
		sync(conn, tcp, nil)
		before := handles(t, conn, hostPolicyInet.table)
		sync(conn, udp, tcp)
		sync(conn, udp, udp)
		after := handles(t, conn, hostPolicyInet.table)
		for chain, hs := range before {
			if d := differing(hs, after[chain]); d > 1 {
				t.Errorf("chain %s: %d rules sent again for a one-rule edit: %v -> %v", chain, d, hs, after[chain])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
