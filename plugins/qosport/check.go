package qosport

import (
	"fmt"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/kernel/tc"
)

// Check verifies every qdisc, filter and rule the plan needs is in place and
// unchanged, wherever Apply put it.
func Check(a Attachment, plan *qos.Plan) error {
	if plan.IsZero() {
		return nil
	}
	host, port, err := hostPort(a)
	if err != nil {
		return err
	}
	if port {
		return checkHost(a, host, plan)
	}
	return checkPod(a, host, plan)
}

// CheckInterface verifies the interface's DSCP and metered rules are
// those of its plan, where SyncInterfaces puts them (the host, the calling
// thread's namespace, for a bridge port or a host end's ingress; else the
// pod): what netclass-dra's rule agent audits. A plan without rules is
// not checked (its shaping is CNI CHECK's: Check).
func CheckInterface(f Interface) error {
	if !f.Plan.NeedsRules() {
		return nil
	}
	a, port, err := locate(f)
	if err != nil {
		return fmt.Errorf("interface %q of %s: %w", f.IfName, f.PodNS, err)
	}
	inPod := func() error {
		return nft.InNamespace(a.PodNS, func(c *nftables.Conn) error { return nft.CheckPodQoS(c, a.IfName, f.Plan) })
	}
	switch {
	case port:
		return onHost(func(c *nftables.Conn) error { return nft.CheckPortQoS(c, a.HostIf, f.Plan) })
	case f.HostIngress && a.HostIf != "":
		return checkHostIngress(a, f.Plan, inPod)
	default:
		return inPod()
	}
}

// checkHostIngress verifies what syncHostIngress makes: the rules at the
// host end's ingress, or in the pod when tc hooks that ingress first.
func checkHostIngress(a Attachment, plan *qos.Plan, inPod func() error) error {
	host, err := link.ByName(a.HostIf)
	if err != nil {
		return err
	}
	hooked, err := tc.HasIngressHook(host)
	if err != nil {
		return err
	}
	if hooked {
		return inPod()
	}
	return onHost(func(c *nftables.Conn) error { return nft.CheckHostIngressQoS(c, a.HostIf, plan) })
}

func onHost(fn func(*nftables.Conn) error) error {
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return fn(c)
}
