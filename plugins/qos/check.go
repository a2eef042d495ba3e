package qos

import (
	"fmt"

	cfg "github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/kernel/tc"
)

// Check verifies every qdisc, filter and rule the plan needs is in place and
// unchanged.
func Check(a Attachment, plan *cfg.Plan) error {
	if plan.IsZero() {
		return nil
	}
	pod, err := netns.Open(a.PodNS)
	if err != nil {
		return err
	}
	defer pod.Close()
	err = netns.Do(a.PodNS, func() error {
		l, err := link.ByName(a.IfName)
		if err != nil {
			return err
		}
		if plan.Egress != nil {
			if err := tc.CheckRootTBF(l, tbf(plan.Egress)); err != nil {
				return fmt.Errorf("egress shaping: %w", err)
			}
		}
		if plan.Ingress != nil && a.HostIf == "" {
			return checkIFB(a, l.Attrs().Index, plan)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if plan.Ingress != nil && a.HostIf != "" {
		host, err := link.ByName(a.HostIf)
		if err != nil {
			return err
		}
		if err := tc.CheckRootTBF(host, tbf(plan.Ingress)); err != nil {
			return fmt.Errorf("ingress shaping: %w", err)
		}
	}
	if plan.NeedsRules() {
		c, err := nft.Open(int(pod.Fd()))
		if err != nil {
			return err
		}
		return nft.CheckQoS(c, a.IfName, plan)
	}
	return nil
}

func checkIFB(a Attachment, ifIndex int, plan *cfg.Plan) error {
	ifb, err := link.ByName(IFBName(a.IfName))
	if err != nil {
		return fmt.Errorf("ingress shaping: %w", err)
	}
	if err := tc.CheckRootTBF(ifb, tbf(plan.Ingress)); err != nil {
		return fmt.Errorf("ingress shaping: %w", err)
	}
	podLink, err := link.ByIndex(ifIndex)
	if err != nil {
		return err
	}
	target, err := tc.IngressRedirectTarget(podLink)
	if err != nil {
		return err
	}
	if target != ifb.Attrs().Index {
		return fmt.Errorf("ingress of %q is not redirected to %q", a.IfName, ifb.Attrs().Name)
	}
	return nil
}
