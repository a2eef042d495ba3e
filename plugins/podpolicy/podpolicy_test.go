package podpolicy

import (
	"fmt"
	"testing"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/test/nstest"
)

// Sync brings every interface to its own plan, the pods in parallel, and
// reports each in the order given: a second Sync of the same plans changes
// nothing, a pod whose namespace is gone fails alone.
func TestSyncManyPods(t *testing.T) {
	var ifs []Interface
	for i := range 12 {
		pod, peer := nstest.New(t), nstest.New(t)
		nstest.Veth(t, pod, "net1", fmt.Sprintf("10.98.%d.1/24", i), peer, "p", "")
		plan := &netpol.Plan{Ingress: netpol.Direction{Isolated: true, Allow: []netpol.Allow{
			{Ports: []netpol.PortRange{{Proto: 6, From: uint16(1000 + i), To: uint16(1000 + i)}}}}}}
		ifs = append(ifs, Interface{PodNS: pod.Path, IfName: "net1", Plan: plan})
	}
	ifs = append(ifs, Interface{PodNS: "/var/run/netns/nct-gone", IfName: "net1", Plan: ifs[0].Plan})
	for round, wantChanged := range []bool{true, false} {
		res := Sync(ifs)
		for i, r := range res[:len(ifs)-1] {
			if r.Err != nil || r.Changed != wantChanged {
				t.Errorf("round %d, pod %d: changed=%v err=%v, want changed=%v", round, i, r.Changed, r.Err, wantChanged)
			}
		}
		if res[len(ifs)-1].Err == nil {
			t.Errorf("round %d: a pod without a namespace synced", round)
		}
	}
	for i, f := range ifs[:len(ifs)-1] {
		err := nft.InNamespace(f.PodNS, func(c *nftables.Conn) error { return nft.CheckPolicy(c, "net1", f.Plan) })
		if err != nil {
			t.Errorf("pod %d holds another plan: %v", i, err)
		}
	}
}

// An interface without a host end, left closed by its ADD, is opened once
// its policy is in its pod.
func TestSyncOpensAnInterfaceInItsPod(t *testing.T) {
	pod, peer := nstest.New(t), nstest.New(t)
	nstest.Veth(t, pod, "net1", "10.96.0.1/24", peer, "p", "")
	in := func(fn func(c *nftables.Conn) error) error { return nft.InNamespace(pod.Path, fn) }
	mac := pod.Link(t, "net1").Attrs().HardwareAddr
	if err := in(func(c *nftables.Conn) error { return nft.InstallPodGuard(c, "net1", nft.Guard{MAC: mac}, true) }); err != nil {
		t.Fatal(err)
	}
	f := Interface{PodNS: pod.Path, IfName: "net1", Plan: &netpol.Plan{Ingress: netpol.Direction{Isolated: true}}}
	if err := Check(f); err == nil {
		t.Fatal("Check passed a closed interface")
	}
	if r := Sync([]Interface{f}); r[0].Err != nil || !r[0].Changed {
		t.Fatalf("Sync: %+v", r[0])
	}
	if err := Check(f); err != nil {
		t.Fatal(err)
	}
}
