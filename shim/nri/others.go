package nri

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/shim/checkpoint"
)

// othersIn returns the names of the interfaces in the pod's namespace that
// are not the sandbox's netclass attachments: what other CNI callers made
// there (nil when Interfaces is not set or fails: the plan is then the
// claims' alone, as before).
func (p *Plugin) othersIn(ctx context.Context, netns, sandbox string, claims []*checkpoint.Claim) map[string]bool {
	if p.Interfaces == nil || netns == "" {
		return nil
	}
	names, err := p.Interfaces(netns)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Interfaces of the pod's namespace not read; naming its claim attachments from the claims alone", "netns", netns, "err", err)
		return nil
	}
	return othersOf(names, sandbox, claims)
}

// othersOf is names less the interfaces the claims recorded for the
// sandbox (an attachment being made again keeps its name).
func othersOf(names []string, sandbox string, claims []*checkpoint.Claim) map[string]bool {
	own := map[string]bool{}
	for _, c := range claims {
		for _, d := range c.Devices {
			for _, a := range d.Attachments {
				if a.SandboxID == sandbox {
					own[a.IfName] = true
				}
			}
		}
	}
	out := map[string]bool{}
	for _, n := range names {
		if !own[n] {
			out[n] = true
		}
	}
	return out
}
