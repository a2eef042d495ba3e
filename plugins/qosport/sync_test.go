package qosport

import (
	"fmt"
	"testing"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/test/nstest"
)

func plan(dscp int) *qos.Plan {
	return qos.Compile(&qos.Spec{Egress: []qos.Rule{{DSCP: &dscp, Classifier: qos.Classifier{
		To: []qos.Peer{{IPBlock: &qos.IPBlock{CIDR: "10.77.0.1/32"}}}}}}})
}

// Pods whose interfaces are bridged veths (their rules on the host port)
// and one whose veth's host end is not in a bridge (its rules in the pod):
// synced together, each holds its plan, and an edit reaches them all.
func TestSyncInterfaces(t *testing.T) {
	host := nstest.New(t)
	host.Bridge(t, "br0")
	var ifs []Interface
	for i := range 3 {
		pod := nstest.New(t)
		hostIf := fmt.Sprintf("h%d", i)
		nstest.Veth(t, pod, "net1", "", host, hostIf, "")
		if i < 2 {
			host.Bridge(t, "br0", hostIf)
		}
		ifs = append(ifs, Interface{PodNS: pod.Path, IfName: "net1"})
	}
	for round, dscp := range []int{18, 20, 20} {
		for i := range ifs {
			ifs[i].Plan = plan(dscp)
		}
		var res []Result
		host.Do(t, func() error { res = SyncInterfaces(ifs); return nil })
		for i, r := range res {
			if r.Err != nil || r.Changed != (round < 2) {
				t.Errorf("round %d (DSCP %d), interface %d: %+v, want changed %v", round, dscp, i, r, round < 2)
			}
		}
		if has, err := podHasRules(ifs[2].PodNS); err != nil || !has {
			t.Errorf("round %d: the unbridged veth's rules are not in its pod: %v, %v", round, has, err)
		}
		host.Do(t, func() error {
			c, err := nft.OpenCurrent()
			if err != nil {
				return err
			}
			for i := range 2 {
				if err := nft.CheckPortQoS(c, fmt.Sprintf("h%d", i), plan(dscp)); err != nil {
					t.Errorf("dscp %d: port h%d: %v", dscp, i, err)
				}
			}
			return nil
		})
	}
}

func podHasRules(podNS string) (bool, error) {
	var has bool
	err := nft.InNamespace(podNS, func(c *nftables.Conn) error {
		var err error
		has, err = nft.HasPodQoS(c, "net1")
		return err
	})
	return has, err
}
