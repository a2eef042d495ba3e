package qosport

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/kernel/tc"
)

// applyHost enforces the plan on the host end of a bridged veth. Shaping
// (links and qdiscs, under the rtnl lock) and the rules (an nftables
// transaction) are independent, and are set up at once, while whatever an
// earlier netclass left in the pod for the interface (rules at its IP
// output, whose drops error the sender) goes.
func applyHost(a Attachment, host netlink.Link, plan *qos.Plan) error {
	return attach.Parallel(
		func() error { return shapeHost(a, host, plan) },
		func() error { return markHost(a, plan) },
		func() error { return removePodRules(a) },
	)
}

func shapeHost(a Attachment, host netlink.Link, plan *qos.Plan) error {
	if plan.Egress != nil {
		ifb, err := link.CreateIFB(HostIFBName(a.HostIf), host.Attrs().MTU, "netclass egress of "+a.HostIf, link.PortGroup(host.Attrs().Index))
		if err != nil {
			return err
		}
		if err := shape(ifb, fmt.Sprintf("the egress of %q", a.IfName), plan.Egress, plan); err != nil {
			return err
		}
		if err := tc.RedirectIngress(host.Attrs().Index, ifb.Attrs().Index); err != nil {
			return fmt.Errorf("shape egress of %q on %q: %w", a.IfName, ifb.Attrs().Name, err)
		}
	}
	if plan.Ingress != nil {
		if err := shape(host, fmt.Sprintf("the ingress of %q", a.IfName), plan.Ingress, plan); err != nil {
			return fmt.Errorf("shape ingress of %q on %q: %w", a.IfName, a.HostIf, err)
		}
	}
	return nil
}

func markHost(a Attachment, plan *qos.Plan) error {
	if !plan.NeedsRules() {
		return nil
	}
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	if err := nft.ApplyPortQoS(c, a.HostIf, plan); err != nil {
		return fmt.Errorf("mark and meter %q on %q: %w", a.IfName, a.HostIf, err)
	}
	return nil
}

// removePortRules and removeHostIFB delete what a host end leaves behind
// when it goes: its rules in the shared table and its egress IFB. They need
// only the host end's name.
func removePortRules(hostIf string) error {
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return nft.DeletePortQoS(c, hostIf)
}

// RemovePortRules deletes a host end's DSCP and metered rules, knowing
// only its name, wherever SyncInterfaces put them on the host (the shared
// table of bridged ports, the host end's own ingress table): what the rule
// agent runs when a pod whose primary interface it marked is gone.
func RemovePortRules(hostIf string) error {
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return errors.Join(nft.DeletePortQoS(c, hostIf), nft.DeleteHostIngressQoS(c, hostIf))
}

func removeHostIFB(hostIf string) error { return link.DeleteIFB(HostIFBName(hostIf)) }

// removeHostShaping deletes the host end's qdiscs (its ingress shaping and
// the redirection of its ingress to the IFB).
func removeHostShaping(hostIf string) error {
	if hostIf == "" {
		return nil
	}
	host, err := link.ByName(hostIf)
	if link.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return errors.Join(tc.DeleteRoot(host.Attrs().Index), tc.DeleteIngress(host.Attrs().Index))
}

// checkHost verifies everything applyHost makes.
func checkHost(a Attachment, host netlink.Link, plan *qos.Plan) error {
	if plan.Egress != nil {
		if err := checkHostIFB(a, host, plan); err != nil {
			return fmt.Errorf("egress shaping: %w", err)
		}
	}
	if plan.Ingress != nil {
		if err := checkShaper(host, plan.Ingress, plan); err != nil {
			return fmt.Errorf("ingress shaping: %w", err)
		}
	}
	if err := checkNoPodRules(a); err != nil {
		return err
	}
	if !plan.NeedsRules() {
		return nil
	}
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return nft.CheckPortQoS(c, a.HostIf, plan)
}

func checkHostIFB(a Attachment, host netlink.Link, plan *qos.Plan) error {
	ifb, err := link.ByName(HostIFBName(a.HostIf))
	if err != nil {
		return err
	}
	if err := checkShaper(ifb, plan.Egress, plan); err != nil {
		return err
	}
	return checkRedirect(host, ifb)
}

// checkRedirect verifies that from's ingress goes to the IFB to.
func checkRedirect(from, to netlink.Link) error {
	target, err := tc.IngressRedirectTarget(from)
	if err != nil {
		return err
	}
	if target != to.Attrs().Index {
		return fmt.Errorf("ingress of %q is not redirected to %q", from.Attrs().Name, to.Attrs().Name)
	}
	return nil
}
