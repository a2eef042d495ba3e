package nft

import (
	"errors"
	"net"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// The class of every frame leaving a network's shared device (its VXLAN
// device on the node), in the HTB tree plugins/kernel/tc's Share puts on
// the device: skb->priority is set as the bridge sends the frame to the
// device — at the bridge's forward hook for the frames of its ports (each
// copy of a flooded frame passes it with its own output port), at its
// output hook for the host's own — after which nothing changes it before
// the device's qdisc. The first rule overwrites whatever priority the
// frame carries (a pod's SO_PRIORITY, or any other marking) with the
// best-effort class; the second gives the frames of an attachment, known
// by its source MAC (which the port guard makes the pod's own), its class:
//
//	table bridge netclass_share_DEV {
//	  map classes { type ether_addr : classid; elements = { MAC : 1:N, ... } }
//	  chain forward { type filter hook forward priority 200; policy accept;
//	    oifname "DEV" meta priority set 1:ffff
//	    oifname "DEV" meta priority set ether saddr map @classes
//	  }
//	  chain output { type filter hook output priority 200; policy accept; the same }
//	}
//
// A lookup that misses ends the rule: the frame keeps the best-effort
// class. (At the device's own netdev egress hook, frames a pod's egress
// shaper had sent through its IFB often kept the default class: seen on
// the test bed and in plugins/vxlan's test.) Priority 200 runs after
// netclass's other bridge chains.

// ShareTable names the table classifying a shared device's frames.
func ShareTable(dev string) string { return "netclass_share_" + dev }

const (
	shareMap      = "classes"
	sharePriority = 200
)

func shareTable(dev string) *nftables.Table {
	return &nftables.Table{Name: ShareTable(dev), Family: nftables.TableFamilyBridge}
}

// shareRuleset renders the table for dev: classes maps a source MAC to its
// class id, def is the class of every other frame.
func shareRuleset(dev string, classes map[string]uint32, def uint32) *ruleset {
	t := shareTable(dev)
	prio := nftables.ChainPriority(sharePriority)
	rs := &ruleset{table: t, rules: map[string][][]expr.Any{}}
	els := make([]nftables.SetElement, 0, len(classes))
	for mac, id := range classes {
		hw, err := net.ParseMAC(mac)
		if err != nil || len(hw) != 6 {
			continue // the caller passes parsed MACs; a bad one gets the default class
		}
		els = append(els, nftables.SetElement{Key: hw, Val: binaryutil.NativeEndian.PutUint32(id)})
	}
	set := &nftables.Set{Table: t, Name: shareMap, ID: rs.setID(), IsMap: true, KeyType: nftables.TypeEtherAddr, DataType: nftables.TypeClassID}
	rs.sets = append(rs.sets, setWithElements{set: set, elements: els})
	setPrio := &expr.Meta{Key: expr.MetaKeyPRIORITY, SourceRegister: true, Register: 1}
	for _, hook := range []struct {
		name string
		num  *nftables.ChainHook
	}{{"forward", nftables.ChainHookForward}, {"output", nftables.ChainHookOutput}} {
		rs.chains = append(rs.chains, &nftables.Chain{Name: hook.name, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: hook.num, Priority: &prio, Policy: policyAccept()})
		rs.rules[hook.name] = [][]expr.Any{
			concat(matchIfname(dev, false), []expr.Any{&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(def)}, setPrio}),
			concat(matchIfname(dev, false), []expr.Any{
				&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
				&expr.Lookup{SourceRegister: 1, SetName: shareMap, SetID: set.ID, IsDestRegSet: true, DestRegister: 1},
				setPrio,
			}),
		}
	}
	return rs
}

// ApplyShare sets dev's table to classes (MAC → class id) and def, in one
// transaction (frames switch classes at once). A kernel without the
// bridge family gets a *FeatureError.
func ApplyShare(c *nftables.Conn, dev string, classes map[string]uint32, def uint32) error {
	rs := shareRuleset(dev, classes, def)
	return unsupported(install(c, rs), GuardFeature)
}

// CheckShare verifies dev's table holds exactly what ApplyShare makes.
func CheckShare(c *nftables.Conn, dev string, classes map[string]uint32, def uint32) error {
	rs := shareRuleset(dev, classes, def)
	if err := verify(c, rs); err != nil {
		return err
	}
	return sameMap(c, rs.table, rs.sets[0])
}

// DeleteShare removes dev's table; none is success.
func DeleteShare(c *nftables.Conn, dev string) error {
	ok, err := tableExists(c, shareTable(dev))
	if err != nil || !ok {
		return err
	}
	if err := deleteTable(c, shareTable(dev)); err != nil && !errors.Is(err, syscall.ENOENT) {
		return err
	}
	return nil
}
