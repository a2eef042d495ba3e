package ruleagent

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/shim/checkpoint"
)

// Guard gives an attachment that was just added its NetworkPolicy, before
// its pod's containers start: the NRI hook calls it after the ADD, holding
// the claim (nri.Plugin.Secure). The port ADD left closed is opened once the
// policy is in place, also when no policy selects the pod, and whether or
// not its network is still offered: a pod is never up without its policy,
// nor kept closed without reason. pod is the pod as the API has it now.
// Guard returns when ctx ends (NRI's budget), the attachment then failing.
func (a *Agent) Guard(ctx context.Context, pod *corev1.Pod, claim types.UID, dev *checkpoint.Device, at checkpoint.Attachment) error {
	if a.NetPol == nil {
		return nil
	}
	net, _ := a.networkOf(dev)
	var out Outcome
	plan := a.policyPlan(pod, net, a.NetPol.Peers, &out)
	if plan == nil {
		return out.Err
	}
	if out.PolicyIgnored != nil {
		klog.FromContext(ctx).Info("Some NetworkPolicy rules are not enforced (what they allow stays closed)",
			"pod", klog.KObj(pod), "network", dev.Network.String(), "reason", out.PolicyIgnored.Error())
	}
	iface := policyItem(at, plan)
	item := iface
	if plan.IsZero() {
		// The port its ADD just made holds no policy: to hold none, it
		// needs only opening, without reading the node's policy tables.
		// (Were it an older port holding one, it stays more closed than
		// its plan, until the audit finds it.)
		item.Prev = plan
	}
	res, err := a.policyWithin(ctx, at.SandboxID, []podpolicy.Interface{item})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return fmt.Errorf("NetworkPolicies %v: %w", out.Policies, err)
	}
	klog.FromContext(ctx).V(2).Info("NetworkPolicy in place before the pod starts", "pod", klog.KObj(pod),
		"interface", at.IfName, "network", dev.Network.String(), "networkPolicies", out.Policies)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.appliedPol[attachmentKey(claim, at)] = heldPolicy{iface: iface, port: res[0].Port}
	return nil
}

// policyWithin runs the policy kernel for the sandbox's attachment, giving
// up when ctx ends first (the call goes on, tracked until it ends; the
// caller fails the attachment, whose rollback waits for it in
// SettleGuards before its DEL).
func (a *Agent) policyWithin(ctx context.Context, sandbox string, items []podpolicy.Interface) ([]podpolicy.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	done := make(chan []podpolicy.Result, 1)
	ended := a.guardStarted(sandbox)
	go func() {
		defer ended()
		done <- a.NetPol.Kernel(items)
	}()
	select {
	case res := <-done:
		return res, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("the policy was not in place in time: %w", ctx.Err())
	}
}

// guardStarted tracks a Guard's kernel call for the sandbox; the returned
// func marks it ended.
func (a *Agent) guardStarted(sandbox string) (ended func()) {
	ch := make(chan struct{})
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.guards == nil {
		a.guards = map[string][]chan struct{}{}
	}
	a.guards[sandbox] = append(a.guards[sandbox], ch)
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.guards[sandbox] = slices.DeleteFunc(a.guards[sandbox], func(c chan struct{}) bool { return c == ch })
		if len(a.guards[sandbox]) == 0 {
			delete(a.guards, sandbox)
		}
		close(ch)
	}
}

// SettleGuards returns once the kernel calls of the sandbox's Guards have
// ended, those a Guard gave up on at its deadline included, or with ctx's
// error when ctx ends first: a failed attachment's DEL must come after
// them, or a call still running would write its policy after the DEL
// removed it. Other sandboxes' calls are not waited for.
func (a *Agent) SettleGuards(ctx context.Context, sandbox string) error {
	a.mu.Lock()
	pending := slices.Clone(a.guards[sandbox])
	a.mu.Unlock()
	for _, ch := range pending {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("a NetworkPolicy call of sandbox %s still runs: %w", sandbox, ctx.Err())
		}
	}
	return nil
}

// attachmentKey names an attachment in the agent's caches.
func attachmentKey(claim types.UID, at checkpoint.Attachment) string {
	return fmt.Sprintf("%s/%s/%s", claim, at.SandboxID, at.IfName)
}
