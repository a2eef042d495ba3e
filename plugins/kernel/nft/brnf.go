package nft

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// RequestBridgeNetfilter asks the kernel to load br_netfilter the one way
// it loads it by itself: the xtables physdev match asks for it the first
// time one is checked, so a rule with one is added to a throwaway table of
// c's namespace and taken away in the same transaction. The kernel's
// module loader runs on the host: this works from a container with neither
// modprobe nor /lib/modules.
func RequestBridgeNetfilter(c *nftables.Conn) error {
	t := &nftables.Table{Name: "netclass_brnf_probe", Family: nftables.TableFamilyIPv4} // ip: the kernel finds xt_physdev by its alias ipt_physdev
	c.AddTable(t)
	ch := c.AddChain(&nftables.Chain{Name: "probe", Table: t})
	// struct xt_physdev_info: physindev, in_mask, physoutdev, out_mask
	// (IFNAMSIZ each), invert, bitmask; XT_ALIGNed to 72 bytes.
	info := xt.Unknown(make([]byte, 72))
	info[65] = 0x04 // XT_PHYSDEV_OP_BRIDGED
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{&expr.Match{Name: "physdev", Rev: 0, Info: &info}}})
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("ask the kernel for br_netfilter (an xtables physdev match): %w", err)
	}
	return nil
}
