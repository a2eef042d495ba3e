package nft

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/traffic"
)

func defaultPCP() [64]uint8 {
	var t [64]uint8
	for d := range t {
		t[d] = uint8(d >> 3)
	}
	return t
}

// sendingNS is podNS with net1 and its peer up, addresses on net1 and a
// permanent neighbour behind it, so datagrams leave through net1's egress.
func sendingNS(t *testing.T) *nstest.NS {
	t.Helper()
	n := podNS(t)
	for _, cmd := range [][]string{
		{"link", "set", "net1", "up"}, {"link", "set", "peer1", "up"},
		{"addr", "add", "192.0.2.1/24", "dev", "net1"}, {"addr", "add", "fd00:2::1/64", "dev", "net1", "nodad"},
		{"neigh", "add", "192.0.2.2", "lladdr", "02:00:00:00:00:02", "dev", "net1"},
		{"neigh", "add", "fd00:2::2", "lladdr", "02:00:00:00:00:02", "dev", "net1"},
	} {
		if out, err := execIn(n, "ip", cmd...); err != nil {
			t.Fatalf("ip %v: %v\n%s", cmd, err, out)
		}
	}
	return n
}

// TestPCPSetsThePriority: the table gives what net1 sends the priority its
// DSCP maps to (IPv4 and IPv6), as a later chain at the same hook counts;
// the map is replaced in place and CHECK tells maps apart.
func TestPCPSetsThePriority(t *testing.T) {
	n := sendingNS(t)
	c := conn(t, n)
	if err := ApplyPCP(c, "net1", defaultPCP()); err != nil {
		t.Fatal(err)
	}
	custom := [64]uint8{46: 6, 10: 3}
	count := `table netdev probe {
  chain c { type filter hook egress device "net1" priority 20; policy accept;
    ip dscp 46 meta priority 0:5 counter
    ip6 dscp 10 meta priority 0:1 counter
    ip dscp 0 meta priority 0:0 counter
    ip dscp 46 meta priority 0:6 counter
    ip6 dscp 10 meta priority 0:3 counter
  }
}`
	if out, err := execIn(n, "sh", "-c", "echo '"+count+"' | nft -f -"); err != nil {
		t.Fatalf("counting chain: %v\n%s", err, out)
	}
	send := func(dst string, tos uint8) {
		t.Helper()
		if err := traffic.SendUDP(n, netip.MustParseAddr(dst), 9, tos, 2, 0); err != nil {
			t.Fatal(err)
		}
	}
	send("192.0.2.2", 46<<2)
	send("fd00:2::2", 10<<2|1)
	send("192.0.2.2", 0)
	if err := ApplyPCP(c, "net1", custom); err != nil {
		t.Fatalf("replace the map: %v", err)
	}
	send("192.0.2.2", 46<<2|2)
	send("fd00:2::2", 10<<2)
	got := counters(t, n)
	want := []int{2, 2, 2, 2, 2} // each rule's packets, in order
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("packets per (DSCP, priority) rule %v, want %v:\n%s", got, want, nftList(t, n, "table", "netdev", "probe"))
	}
	if err := CheckPCP(c, "net1", custom); err != nil {
		t.Errorf("CHECK of the replaced map: %v", err)
	}
	if err := CheckPCP(c, "net1", defaultPCP()); err == nil || !strings.Contains(err.Error(), "maps to") {
		t.Errorf("CHECK against the other map: %v, want the element named", err)
	}
	if out, err := execIn(n, "nft", "delete", "rule", "netdev", PCPTable("net1"), "egress", "handle", handleOf(t, n)); err != nil {
		t.Fatalf("tamper: %v\n%s", err, out)
	}
	if err := CheckPCP(c, "net1", custom); err == nil {
		t.Error("CHECK passed with a rule deleted")
	}
	for range 2 {
		if err := DeletePCP(c, "net1"); err != nil {
			t.Fatalf("DeletePCP: %v", err)
		}
	}
	if strings.Contains(nftList(t, n, "tables"), PCPTable("net1")) {
		t.Error("DeletePCP left the table")
	}
}

// counters reads the packet counters of the probe chain, in rule order.
func counters(t *testing.T, n *nstest.NS) []int {
	t.Helper()
	var out []int
	deadline := time.Now().Add(2 * time.Second)
	for {
		out = out[:0]
		for _, m := range regexp.MustCompile(`counter packets (\d+)`).FindAllStringSubmatch(nftList(t, n, "table", "netdev", "probe"), -1) {
			var v int
			fmt.Sscan(m[1], &v)
			out = append(out, v)
		}
		sum := 0
		for _, v := range out {
			sum += v
		}
		if sum >= 10 || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond) // polling counters with a deadline
	}
}

// handleOf returns the handle of the first rule of the PCP chain.
func handleOf(t *testing.T, n *nstest.NS) string {
	t.Helper()
	b, err := execIn(n, "nft", "-a", "list", "chain", "netdev", PCPTable("net1"), "egress")
	out := string(b)
	if err != nil {
		t.Fatalf("nft -a list: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`# handle (\d+)\n`).FindAllStringSubmatch(out, -1)
	if len(m) < 2 {
		t.Fatalf("no rule handles in:\n%s", out)
	}
	return m[1][1] // [0] is the chain's
}
