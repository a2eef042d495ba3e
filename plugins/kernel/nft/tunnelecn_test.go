package nft

import (
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/test/nstest"
)

// TestTunnelECN: the table is what nft reads as the statements meant, the
// ports of two devices accumulate (add-only), CHECK finds a port or a rule
// missing.
func TestTunnelECN(t *testing.T) {
	n := nstest.New(t)
	c := conn(t, n)
	for _, port := range []uint16{4789, 8472, 4789} {
		if err := EnsureTunnelECN(c, port); err != nil {
			t.Fatalf("EnsureTunnelECN(%d): %v", port, err)
		}
	}
	got := nftList(t, n, "table", "inet", TunnelECNTable)
	for _, want := range []string{
		"type filter hook output priority mangle; policy accept;",
		"elements = { 4789, 8472 }",
		"udp dport @ports @th,224,16 0x800 @th,248,8 & 0x3 == 0x3 ip ecn set ce",
		"udp dport @ports @th,224,16 0x86dd @th,248,8 & 0x30 == 0x30 ip ecn set ce",
		"udp dport @ports @th,224,16 0x800 @th,248,8 & 0x3 == 0x3 ip6 ecn set ce",
		"udp dport @ports @th,224,16 0x86dd @th,248,8 & 0x30 == 0x30 ip6 ecn set ce",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("nft list lacks %q:\n%s", want, got)
		}
	}
	for _, port := range []uint16{4789, 8472} {
		if err := CheckTunnelECN(c, port); err != nil {
			t.Errorf("CHECK of port %d: %v", port, err)
		}
	}
	if err := CheckTunnelECN(c, 9999); err == nil || !strings.Contains(err.Error(), "lacks port 9999") {
		t.Errorf("CHECK of a port never added: %v", err)
	}
	if out, err := execIn(n, "nft", "flush", "chain", "inet", TunnelECNTable, "output"); err != nil {
		t.Fatalf("tamper: %v\n%s", err, out)
	}
	if err := CheckTunnelECN(c, 4789); err == nil {
		t.Error("CHECK passed with the rules flushed")
	}
}
