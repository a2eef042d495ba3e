package qosagent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/shim/checkpoint"
)

// Guard gives an attachment that was just added its NetworkPolicy table,
// before its pod's containers start: the NRI hook calls it after the ADD,
// holding the claim (nri.Plugin.Secure), so a pod a policy selects is never
// open on the network, not even until the agent's next sync. pod is the
// pod as the API has it now. A plan that isolates nothing costs no kernel
// access here; it is not recorded either, so the next sync checks that no
// table is there (an ADD redone after a crash reuses the namespace).
func (a *Agent) Guard(ctx context.Context, pod *corev1.Pod, claim types.UID, dev *checkpoint.Device, at checkpoint.Attachment) error {
	if a.NetPol == nil {
		return nil
	}
	offer, ok := a.networks.Lookup(dev.Device)
	if !ok || offer.Network.Ref != dev.Network {
		return nil // not a network of the node's any more: the sync leaves it alone too
	}
	var out Outcome
	plan := a.policyPlan(pod, offer.Network, &out)
	if plan == nil {
		return out.Err
	}
	if out.PolicyIgnored != nil {
		klog.FromContext(ctx).Info("Some NetworkPolicy rules are not enforced (what they allow stays closed)",
			"pod", klog.KObj(pod), "network", dev.Network.String(), "reason", out.PolicyIgnored.Error())
	}
	if plan.IsZero() {
		return nil
	}
	res := a.NetPol.Kernel([]podpolicy.Interface{{PodNS: at.NetNS, IfName: at.IfName, Plan: plan}})
	if err := res[0].Err; err != nil {
		return fmt.Errorf("NetworkPolicies %v: %w", out.Policies, err)
	}
	klog.FromContext(ctx).V(2).Info("NetworkPolicy installed before the pod starts", "pod", klog.KObj(pod),
		"interface", at.IfName, "network", dev.Network.String(), "networkPolicies", out.Policies)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.appliedPol[attachmentKey(claim, at)] = plan
	return nil
}

// attachmentKey names an attachment in the agent's caches.
func attachmentKey(claim types.UID, at checkpoint.Attachment) string {
	return fmt.Sprintf("%s/%s/%s", claim, at.SandboxID, at.IfName)
}
