package nft

import (
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// SpoofCheckTable names the bridge-family table that keeps a pod from
// sending frames with another source MAC than its own.
func SpoofCheckTable(hostIf string) string { return "netclass_msc_" + hostIf }

func spoofTable(hostIf string) *nftables.Table {
	return &nftables.Table{Name: SpoofCheckTable(hostIf), Family: nftables.TableFamilyBridge}
}

// spoofRuleset: `iifname HOSTIF ether saddr != MAC drop` at bridge prerouting.
func spoofRuleset(hostIf string, mac net.HardwareAddr) *ruleset {
	t := spoofTable(hostIf)
	prio := nftables.ChainPriority(-300)
	ch := &nftables.Chain{
		Name: "prerouting", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: &prio, Policy: policyAccept(),
	}
	return &ruleset{table: t, chains: []*nftables.Chain{ch}, rules: map[string][][]expr.Any{
		ch.Name: {concat(matchIifname(hostIf), matchEtherSaddrNot(mac), []expr.Any{verdict(expr.VerdictDrop)})},
	}}
}

// ApplySpoofCheck drops frames from hostIf whose source MAC is not mac.
func ApplySpoofCheck(c *nftables.Conn, hostIf string, mac net.HardwareAddr) error {
	return install(c, spoofRuleset(hostIf, mac))
}

// CheckSpoofCheck verifies the spoof-check table is intact.
func CheckSpoofCheck(c *nftables.Conn, hostIf string, mac net.HardwareAddr) error {
	return verify(c, spoofRuleset(hostIf, mac))
}

// DeleteSpoofCheck removes the table; none is success.
func DeleteSpoofCheck(c *nftables.Conn, hostIf string) error {
	return deleteTable(c, spoofTable(hostIf))
}
