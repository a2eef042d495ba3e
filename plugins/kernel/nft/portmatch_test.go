package nft

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
)

// A protocol's ports that merge into one range are matched in the rule;
// only ports that stay apart take a set.
func TestPortSets(t *testing.T) {
	tcp := func(from, to uint16) netpol.PortRange { return netpol.PortRange{Proto: 6, From: from, To: to} }
	udp := func(from, to uint16) netpol.PortRange { return netpol.PortRange{Proto: 17, From: from, To: to} }
	be := func(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }
	for _, tc := range []struct {
		name  string
		ports []netpol.PortRange
		// per protocol, in order: the port match after the protocol's ("" every port)
		want []string
		sets []string
	}{
		{"no ports: every packet", nil, []string{"any packet"}, nil},
		{"one port", []netpol.PortRange{tcp(80, 80)}, []string{"dport 80"}, nil},
		{"a range", []netpol.PortRange{tcp(30000, 30100)}, []string{"dport 30000-30100"}, nil},
		{"ports that touch merge", []netpol.PortRange{tcp(81, 81), tcp(80, 80), tcp(82, 90)}, []string{"dport 80-90"}, nil},
		{"overlapping ranges merge", []netpol.PortRange{tcp(100, 200), tcp(150, 300)}, []string{"dport 100-300"}, nil},
		{"ports apart take a set", []netpol.PortRange{tcp(80, 80), tcp(443, 443)}, []string{"set x_p6"}, []string{"x_p6"}},
		{"a protocol without ports matches all of them", []netpol.PortRange{tcp(0, 0), tcp(80, 80)}, []string{"every port"}, nil},
		{"each protocol on its own", []netpol.PortRange{udp(53, 53), tcp(53, 53), udp(5000, 5000)},
			[]string{"dport 53", "set x_p17"}, []string{"x_p17"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := hostPolicyInet.newPort(0).rs
			matches := portSets(rs, "x", tc.ports)
			var got []string
			for _, m := range matches {
				got = append(got, describePortMatch(t, m, be))
			}
			if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("matches %q, want %q", got, tc.want)
			}
			var sets []string
			for _, s := range rs.sets {
				sets = append(sets, s.set.Name)
			}
			if strings.Join(sets, ",") != strings.Join(tc.sets, ",") {
				t.Errorf("sets %q, want %q", sets, tc.sets)
			}
		})
	}
}

// An allow listing the ports an earlier allow of the port listed (in any
// order) uses its set.
func TestPortSetsShared(t *testing.T) {
	tcp := func(ports ...uint16) []netpol.PortRange {
		var out []netpol.PortRange
		for _, p := range ports {
			out = append(out, netpol.PortRange{Proto: 6, From: p, To: p})
		}
		return out
	}
	be := func(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }
	rs := hostPolicyInet.newPort(0).rs
	var got []string
	for _, a := range []struct {
		name  string
		ports []netpol.PortRange
	}{{"x", tcp(80, 443)}, {"y", tcp(443, 80)}, {"z", tcp(80, 444)}} {
		got = append(got, describePortMatch(t, portSets(rs, a.name, a.ports)[0], be))
	}
	if want := "set x_p6; set x_p6; set z_p6"; strings.Join(got, "; ") != want {
		t.Errorf("matches %q, want %s", got, want)
	}
	if len(rs.sets) != 2 {
		t.Errorf("%d sets, want 2", len(rs.sets))
	}
}

// describePortMatch names what a rendered port match does.
func describePortMatch(t *testing.T, m []expr.Any, be func(uint16) []byte) string {
	t.Helper()
	if len(m) == 0 {
		return "any packet"
	}
	if len(m) == 2 {
		return "every port"
	}
	if len(m) != 4 {
		t.Fatalf("a port match of %d expressions: %#v", len(m), m)
	}
	switch e := m[3].(type) {
	case *expr.Cmp:
		return "dport " + portText(e.Data)
	case *expr.Range:
		return "dport " + portText(e.FromData) + "-" + portText(e.ToData)
	case *expr.Lookup:
		return "set " + e.SetName
	}
	t.Fatalf("unexpected port match %#v", m[3])
	return ""
}

func portText(b []byte) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), binary.BigEndian.Uint16(b)).String()[len("0.0.0.0:"):]
}

// On the switch port, a range matched in the rule and ports in a set
// admit what they list and nothing next to it, and CHECK reads both back
// as rendered.
func TestHostPolicyPortRanges(t *testing.T) {
	b := newSwitchBed(t, "a", "b")
	a := b.pods["a"]
	b.guard(t, false, "a", "b")
	for _, port := range []int{7999, 8000, 8003, 8004, 9000, 9003, 9005} {
		listen(t, b.pods["b"].ns, b.pods["b"].ip.String(), port)
	}
	tcp := func(from, to uint16) netpol.PortRange { return netpol.PortRange{Proto: 6, From: from, To: to} }
	b.policy(t, map[string]*netpol.Plan{"b": {Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{
		{V4: hostRanges(a.ip), V6: []qos.Range{}, Ports: []netpol.PortRange{tcp(8000, 8002), tcp(8002, 8003)}},
		{V4: hostRanges(a.ip), V6: []qos.Range{}, Ports: []netpol.PortRange{tcp(9000, 9000), tcp(9005, 9005)}},
	}}}})
	for _, tc := range []struct {
		port int
		open bool
	}{{7999, false}, {8000, true}, {8003, true}, {8004, false}, {9000, true}, {9003, false}, {9005, true}} {
		if got := b.tcp(t, "a", "b", tc.port); got != tc.open {
			t.Errorf("a -> b TCP/%d open: %v, want %v", tc.port, got, tc.open)
		}
	}
	got := nftList(t, b.host, "table", "inet", HostPolicyTable)
	hostIf := b.pods["b"].hostIf
	for _, want := range []string{"tcp dport 8000-8003 accept", "tcp dport @in/" + hostIf + "/a1_p6 accept"} {
		if !strings.Contains(got, want) {
			t.Errorf("nft list lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "a0_p6") {
		t.Errorf("the merged range has a set:\n%s", got)
	}
}

// Allows of a port that name the same peers share one set, whether the
// rendering has the sync's element cache or not (CHECK renders without).
func TestPeerSetsShared(t *testing.T) {
	p, q := hostRange("10.9.0.1"), hostRange("10.9.0.2")
	p6 := hostRange("fd00::1")
	tcp := func(port uint16) []netpol.PortRange { return []netpol.PortRange{{Proto: 6, From: port, To: port}} }
	plan := &netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{
		{V4: p, V6: p6, Ports: tcp(80)},
		{V4: q, V6: []qos.Range{}, Ports: tcp(81)},
		{V4: p, V6: []qos.Range{}, Ports: tcp(82)},
		{V4: slices.Clone(q), V6: slices.Clone(p6), Ports: tcp(83)},
	}}}
	want := map[string]string{"80": "in/x/a0_v4 in/x/a0_v6", "81": "in/x/a1_v4", "82": "in/x/a0_v4", "83": "in/x/a1_v4 in/x/a0_v6"}
	for _, cache := range []*elementCache{newElementCache(), nil} {
		inet, _ := hostPolicyObjects("x", HostPort{Bridge: "br0", Plan: plan}, cache)
		var sets []string
		for _, s := range inet.rs.sets {
			sets = append(sets, s.set.Name)
		}
		if got := strings.Join(sets, " "); got != "in/x/a0_v4 in/x/a0_v6 in/x/a1_v4" {
			t.Errorf("cache %v: sets %s", cache != nil, got)
		}
		got := map[string][]string{}
		for _, r := range inet.rs.rules["in/x"] {
			var port string
			var names []string
			for _, e := range r {
				switch e := e.(type) {
				case *expr.Lookup:
					names = append(names, e.SetName)
				case *expr.Cmp:
					if len(e.Data) == 2 {
						port = portText(e.Data)
					}
				}
			}
			if port != "" && len(names) > 0 {
				got[port] = append(got[port], names...)
			}
		}
		for port, sets := range want {
			if g := strings.Join(got[port], " "); g != sets {
				t.Errorf("cache %v: TCP/%s looks up %q, want %q", cache != nil, port, g, sets)
			}
		}
	}
}

// Allows sharing a set part when one's peers change, and share again when
// they are the same once more: traffic follows each edit, synced from the
// kernel and from the plan the port last held.
func TestPeerSetsSplitAndJoinAgain(t *testing.T) {
	b := newSwitchBed(t, "a", "b", "c")
	a, c, dst := b.pods["a"], b.pods["c"], b.pods["b"]
	b.guard(t, false, "a", "b", "c")
	for _, port := range []int{80, 81} {
		listen(t, dst.ns, dst.ip.String(), port)
	}
	plan := func(from80, from81 *swPod) *netpol.Plan {
		allow := func(from *swPod, port uint16) netpol.Allow {
			return netpol.Allow{V4: hostRanges(from.ip), V6: []qos.Range{}, Ports: []netpol.PortRange{{Proto: 6, From: port, To: port}}}
		}
		return &netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{allow(from80, 80), allow(from81, 81)}}}
	}
	var prev *netpol.Plan
	for i, step := range []struct {
		plan     *netpol.Plan
		fromPrev bool
		open     map[string]bool // "<pod>:<port>"
	}{
		{plan(a, a), false, map[string]bool{"a:80": true, "a:81": true, "c:80": false, "c:81": false}},
		{plan(c, a), true, map[string]bool{"a:80": false, "a:81": true, "c:80": true, "c:81": false}},
		{plan(c, c), true, map[string]bool{"a:80": false, "a:81": false, "c:80": true, "c:81": true}},
		{plan(a, c), false, map[string]bool{"a:80": true, "a:81": false, "c:80": false, "c:81": true}},
		{plan(a, a), true, map[string]bool{"a:80": true, "a:81": true, "c:80": false, "c:81": false}},
	} {
		port := HostPort{Bridge: "br0", MAC: dst.mac, Addrs: []netip.Addr{dst.ip}, Plan: step.plan}
		if step.fromPrev {
			port.Prev = prev
		}
		b.nft(t, func(conn *nftables.Conn) error {
			if r := SyncHostPolicies(conn, map[string]HostPort{dst.hostIf: port})[dst.hostIf]; r.Err != nil {
				return fmt.Errorf("step %d: %w", i, r.Err)
			}
			port.Prev = nil
			return CheckHostPolicy(conn, dst.hostIf, port)
		})
		prev = step.plan
		for _, from := range []string{"a", "c"} {
			for _, p := range []int{80, 81} {
				if got, want := b.tcp(t, from, "b", p), step.open[fmt.Sprintf("%s:%d", from, p)]; got != want {
					t.Errorf("step %d: %s -> b TCP/%d open %v, want %v", i, from, p, got, want)
				}
			}
		}
	}
}
