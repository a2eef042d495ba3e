// Package podpolicy applies NetworkPolicy plans (conf/netpol) to pod
// interfaces: each interface's table lives in its pod's network namespace
// (plugins/kernel/nft.PolicyTable), and is brought to the plan in place.
package podpolicy

import (
	"fmt"
	"sync"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/netpol"
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

// workers bounds the pods synced at once: a pod's sync mostly waits on
// the kernel (its table's dump, its transaction's commit), so several in
// parallel finish an edit selecting many pods sooner (make bench, 100 pods:
// 4 workers took p50 from 0.76 s to 0.32 s, 8 to 0.26 s).
const workers = 8

// Sync brings each interface's policy table to its plan; results are in
// the order of ifs.
func Sync(ifs []Interface) []Result {
	out := make([]Result, len(ifs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(ifs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i].Changed, out[i].Err = syncOne(ifs[i])
			}
		}()
	}
	for i := range ifs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func syncOne(f Interface) (changed bool, err error) {
	err = nft.InNamespace(f.PodNS, func(c *nftables.Conn) error {
		changed, err = nft.SyncPolicy(c, f.IfName, f.Plan)
		return err
	})
	if err != nil {
		return changed, fmt.Errorf("policy of %q: %w", f.IfName, err)
	}
	return changed, nil
}
