package bridge

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// An admin's dscpPolicy on a netclass-bridge network: what a pod marks
// itself with a value the policy leaves out (EF, CS6) reaches its
// neighbour re-marked, an allowed value passes, IPv4 and IPv6; a pod's
// runtimeConfig.qos asking for a value left out fails ADD with CNI error 7
// naming the field, and leaves no link.
func TestDSCPPolicyOnTheWire(t *testing.T) {
	h := cnitest.NewHost(t)
	policy := map[string]any{"allowed": []any{map[string]any{"first": 0, "last": 40}}, "remark": 0}
	guarded := newNetwork(t, "blue", "blue0", []string{"10.21.0.0/24", "fd21::/64"}, map[string]any{"dscpPolicy": policy})
	plain := newNetwork(t, "blue", "blue0", []string{"10.21.0.0/24", "fd21::/64"}, nil)
	plain.conf["ipam"], plain.conf["dataDir"] = guarded.conf["ipam"], guarded.conf["dataDir"]
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	h.Add(t, plugin, guarded.bytes(t), a, "net1")
	rb := h.Add(t, plugin, plain.bytes(t), b, "net1")
	bv4, bv6 := podIP(t, rb, false), podIP(t, rb, true)
	if err := traffic.Ping(a.NS, bv6, 5*time.Second); err != nil { // v6 DAD and neighbours settled
		t.Fatal(err)
	}
	sniff, err := traffic.Sniff(b.NS, "net1")
	if err != nil {
		t.Fatal(err)
	}
	defer sniff.Close()
	for _, tc := range []struct {
		dst       netip.Addr
		port      uint16
		tos, want uint8
	}{
		{bv4, 6001, 46, 0}, {bv4, 6002, 48, 0}, {bv4, 6003, 34, 34},
		{bv6, 6004, 46, 0}, {bv6, 6005, 40, 40},
	} {
		if err := traffic.SendUDP(a.NS, tc.dst, tc.port, tc.tos<<2, 2, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		got := sniff.WaitFor(func(p traffic.Packet) bool { return p.Dst == tc.dst && p.DstPort == tc.port }, 2, 2*time.Second)
		if len(got) < 2 {
			t.Fatalf("b saw %d of a's datagrams to %s:%d", len(got), tc.dst, tc.port)
		}
		if got[0].DSCP != tc.want {
			t.Errorf("a sends DSCP %d to %s: b sees %d, want %d", tc.tos, tc.dst, got[0].DSCP, tc.want)
		}
	}

	c := cnitest.NewPod(t)
	asks := cnitest.WithField(t, guarded.bytes(t), "runtimeConfig", map[string]any{"qos": map[string]any{"dscp": 46}})
	_, err = h.Exec(c.Call(plugin, "ADD", "net1", asks))
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Msg, "runtimeConfig.qos.dscp: 46 is not allowed by dscpPolicy") {
		t.Errorf("ADD asking for EF under a policy of 0-40: %v, want CNI error 7 naming runtimeConfig.qos.dscp", err)
	}
	if c.NS.HasLink(t, "net1") {
		t.Error("the refused ADD left a link")
	}
}
