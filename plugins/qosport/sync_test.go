package qosport

import (
	"errors"
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
	host, ifs := podsOn(t, 3, 2)
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

// podsOn makes a host with bridge br0 and n pods, each net1 a veth whose
// host end is h<i>, the first bridged of them ports of br0.
func podsOn(t *testing.T, n, bridged int) (*nstest.NS, []Interface) {
	host := nstest.New(t)
	host.Bridge(t, "br0")
	var ifs []Interface
	for i := range n {
		pod := nstest.New(t)
		hostIf := fmt.Sprintf("h%d", i)
		nstest.Veth(t, pod, "net1", "", host, hostIf, "")
		if i < bridged {
			host.Bridge(t, "br0", hostIf)
		}
		ifs = append(ifs, Interface{PodNS: pod.Path, IfName: "net1"})
	}
	return host, ifs
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

// CheckInterface finds an interface's rules other than its plan, and
// changed behind netclass's back (a port's chain flushed, a pod's table
// deleted); a sync that reads them back puts them right.
func TestCheckInterfaceFindsRulesChangedBehindItsBack(t *testing.T) {
	host, ifs := podsOn(t, 2, 1)
	for i := range ifs {
		ifs[i].Plan = plan(18)
	}
	sync := func() {
		t.Helper()
		host.Do(t, func() error { return errors.Join(resultErrs(SyncInterfaces(ifs))...) })
	}
	check := func(f Interface) (err error) {
		host.Do(t, func() error { err = CheckInterface(f); return nil })
		return err
	}
	sync()
	for i, f := range ifs {
		other := f
		other.Plan = plan(20)
		if err := check(f); err != nil {
			t.Fatalf("interface %d as synced: %v", i, err)
		}
		if err := check(other); err == nil {
			t.Errorf("interface %d checked against another plan: no difference found", i)
		}
	}
	host.Do(t, func() error {
		c, err := nft.OpenCurrent()
		if err != nil {
			return err
		}
		c.FlushChain(&nftables.Chain{Name: nft.PortChain("h0"), Table: &nftables.Table{Name: nft.PortQoSTable, Family: nftables.TableFamilyBridge}})
		return c.Flush()
	})
	if err := nft.InNamespace(ifs[1].PodNS, func(c *nftables.Conn) error { return nft.DeletePodQoS(c, "net1") }); err != nil {
		t.Fatal(err)
	}
	for i, f := range ifs {
		if err := check(f); err == nil {
			t.Errorf("interface %d changed behind its back: no difference found", i)
		}
	}
	sync()
	for i, f := range ifs {
		if err := check(f); err != nil {
			t.Errorf("interface %d after a sync: %v", i, err)
		}
	}
}

func resultErrs(res []Result) []error {
	var errs []error
	for _, r := range res {
		errs = append(errs, r.Err)
	}
	return errs
}
