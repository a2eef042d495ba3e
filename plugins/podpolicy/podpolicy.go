// Package podpolicy applies NetworkPolicy plans (conf/netpol) to pod
// interfaces: each interface's table lives in its pod's network namespace
// (plugins/kernel/nft.PolicyTable), and is brought to the plan in place.
package podpolicy

import (
	"fmt"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
)

// Interface is a pod interface whose policy Sync brings to Plan.
type Interface struct {
	PodNS, IfName string
	Plan          *netpol.Plan
}

// Result is what a sync did to one interface.
type Result struct {
	Changed bool
	Err     error
}

// Sync brings each interface's policy table to its plan; results are in
// the order of ifs.
func Sync(ifs []Interface) []Result {
	out := make([]Result, len(ifs))
	for i, f := range ifs {
		out[i].Changed, out[i].Err = syncOne(f)
	}
	return out
}

func syncOne(f Interface) (bool, error) {
	pod, err := netns.Open(f.PodNS)
	if err != nil {
		return false, err
	}
	defer pod.Close()
	c, err := nft.Open(int(pod.Fd()))
	if err != nil {
		return false, err
	}
	defer c.CloseLasting()
	changed, err := nft.SyncPolicy(c, f.IfName, f.Plan)
	if err != nil {
		return changed, fmt.Errorf("policy of %q: %w", f.IfName, err)
	}
	return changed, nil
}
