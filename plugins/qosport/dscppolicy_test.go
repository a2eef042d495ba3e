package qosport

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/test/traffic"
)

// An admin's DSCP policy on a port: what the pod marks itself with a value
// the policy leaves out reaches the fabric re-marked, an allowed value
// passes, and netclass's own (allowed) marking still wins, IPv4 and IPv6;
// a pod flushing what it sees changes none of it (the rules are on the
// host end); a sync of the same plan changes nothing, one of another
// policy changes the port.
func TestDSCPPolicyRemarksWhatThePodMarks(t *testing.T) {
	c := newPrimaryCNI(t)
	remark := 8
	policy := &qos.DSCPPolicy{Allowed: []qos.DSCPRange{{First: 0, Last: 40}}, Remark: &remark}
	if err := policy.Validate("dscpPolicy"); err != nil {
		t.Fatal(err)
	}
	plan := qos.Compile(&qos.Spec{Policy: policy, Egress: []qos.Rule{markTo(34, "fd99::/64")}})
	if r := c.sync(t, plan); r.Err != nil || !r.Changed {
		t.Fatalf("sync: %+v", r)
	}
	if r := c.sync(t, plan); r.Err != nil || r.Changed {
		t.Errorf("the same plan again: %+v, want nothing changed", r)
	}
	c.pod.Output(t, "nft", "flush", "ruleset")
	for _, tc := range []struct {
		dst       string
		tos, want uint8
	}{
		{"10.99.0.3", 46, 8},  // EF: left out, re-marked
		{"10.99.0.3", 63, 8},  // the last value
		{"10.99.0.3", 26, 26}, // AF31: allowed, kept
		{"10.99.0.3", 40, 40}, // the range's edge
		{"10.99.0.3", 41, 8},  // one past it
		{"fd99::3", 48, 34},   // CS6 under a rule: the rule's marking
		{"10.99.0.3", 0, 0},
	} {
		if got := c.dscpFrom(t, tc.dst, tc.tos); got != tc.want {
			t.Errorf("the pod sends DSCP %d to %s: the peer sees %d, want %d", tc.tos, tc.dst, got, tc.want)
		}
	}
	// The admin widens the policy to EF and re-marks to 0: the port's
	// rules are edited in place.
	zero := 0
	wider := &qos.DSCPPolicy{Allowed: []qos.DSCPRange{{First: 0, Last: 40}, {First: 46, Last: 46}}, Remark: &zero}
	if r := c.sync(t, qos.Compile(&qos.Spec{Policy: wider})); r.Err != nil || !r.Changed {
		t.Fatalf("sync of the wider policy: %+v", r)
	}
	for tos, want := range map[uint8]uint8{46: 46, 48: 0, 41: 0} {
		if got := c.dscpFrom(t, "fd99::3", tos); got != want {
			t.Errorf("wider policy: the pod sends DSCP %d over IPv6: the peer sees %d, want %d", tos, got, want)
		}
	}
	if r := c.sync(t, primaryPlan()); r.Err != nil || !r.Changed {
		t.Fatalf("empty plan: %+v", r)
	}
	if got := c.dscpFrom(t, "10.99.0.3", 46); got != 46 {
		t.Errorf("without a policy the peer sees DSCP %d, want the pod's 46", got)
	}
}

// dscpFrom sends UDP marked with dscp from the pod to dst and returns the
// DSCP the peer receives it with.
func (c *primaryCNI) dscpFrom(t *testing.T, dst string, dscp uint8) uint8 {
	t.Helper()
	s, err := traffic.Sniff(c.peer, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := netip.MustParseAddr(dst)
	if err := traffic.SendUDP(c.pod, addr, 9998, dscp<<2, 3, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	got := s.WaitFor(func(p traffic.Packet) bool { return p.Dst == addr && p.DstPort == 9998 }, 3, 2*time.Second)
	if len(got) < 3 {
		t.Fatalf("the peer saw %d of the pod's datagrams to %s", len(got), dst)
	}
	return got[0].DSCP
}
