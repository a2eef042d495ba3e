package nri

// Detaching: what a sandbox that stops, fails or is unprepared gives back.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/shim/checkpoint"
)

// rollback deletes the attachments a failed sandbox got, last first, and
// forgets them, once the sandbox's Secure work has settled.
func (p *Plugin) rollback(ctx context.Context, sandbox, netns string, steps []Step) {
	p.settleSecure(ctx, sandbox)
	p.undo(ctx, sandbox, netns, steps)
}

// settleSecure waits until the sandbox's Secure work has ended (a Secure
// past its deadline returns while its kernel call goes on), so that the
// DELs remove what it wrote rather than run before it.
func (p *Plugin) settleSecure(ctx context.Context, sandbox string) {
	if p.SettleSecure == nil {
		return
	}
	if err := p.SettleSecure(ctx, sandbox); err != nil {
		klog.FromContext(ctx).Error(err, "Rolling back a failed sandbox while its NetworkPolicy call still runs: that call may write after the DEL", "sandbox", short(sandbox))
	}
}

// undo runs the DELs of a rollback; once they all succeeded the sandbox's
// epoch is forgotten (the runtime retries with a new sandbox).
func (p *Plugin) undo(ctx context.Context, sandbox, netns string, steps []Step) {
	failed := false
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		att := checkpoint.Attachment{PodUID: s.Pod.UID, SandboxID: sandbox, NetNS: netns, IfName: s.IfName}
		if err := p.detach(ctx, s.Claim.UID, s.DeviceIdx, *s.Device(), s.Pod, att); err != nil {
			failed = true
			klog.FromContext(ctx).Error(err, "Rolling back a failed attachment failed; CNI GC will remove it", "pod", klog.KRef(s.Pod.Namespace, s.Pod.Name))
		}
	}
	if !failed {
		p.epochs.forget(sandbox)
	}
}

// rollbackHolding is rollback for a caller that does not hold the steps'
// claims (RunPodSandbox's, which rolls back after answering the runtime):
// it takes their locks first, so the rule agent, which applies rules under
// them to the attachments a claim's record says are attached, cannot write
// a port's rules after its DEL removed them. When the locks cannot be had
// within ctx it rolls back without them: a device left until CNI GC would
// be worse than a race with the agent.
func (p *Plugin) rollbackHolding(ctx context.Context, sandbox, netns string, steps []Step) {
	if len(steps) == 0 {
		return
	}
	// Settled before the locks: a kernel call that hangs must not hold the
	// claims from the agent and from other sandboxes while the rollback
	// waits for it (no new Secure work starts for a sandbox that failed).
	p.settleSecure(ctx, sandbox)
	uids := make([]types.UID, len(steps))
	for i, s := range steps {
		uids[i] = s.Claim.UID
	}
	release, err := p.locks.lock(ctx, uids...)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Rolling back a failed sandbox without its claims' locks", "sandbox", short(sandbox))
		release = func() {}
	}
	defer release()
	p.undo(ctx, sandbox, netns, steps)
}

// detach runs DEL for one attachment and forgets it once DEL succeeded.
func (p *Plugin) detach(ctx context.Context, claim types.UID, idx int, dev checkpoint.Device, pod checkpoint.Pod, att checkpoint.Attachment) error {
	if err := p.CNI.Del(ctx, dev.ConfList, cniAttachment(pod, dev, att)); err != nil {
		return err
	}
	return p.Store.Update(claim, func(c *checkpoint.Claim) error {
		if idx < len(c.Devices) {
			c.Devices[idx].RemoveAttachment(att.SandboxID)
		}
		return nil
	})
}

// detachSandbox deletes a stopped sandbox's attachments within NRI's budget.
// A failure is retried in the background with backoff until it succeeds, the
// claim is unprepared or the daemon stops; it is returned for the hook's
// outcome only (StopPodSandbox and RemovePodSandbox answer the runtime nil:
// it would only log it).
func (p *Plugin) detachSandbox(ctx context.Context, pod *api.PodSandbox) error {
	if len(p.Store.ForPod(types.UID(pod.GetUid()))) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.currentBudget()-p.margin())
	defer cancel()
	if err := p.detachOnce(ctx, pod); err != nil {
		klog.FromContext(p.logCtx).Error(err, "Detaching a stopped sandbox failed; retrying in the background",
			"pod", klog.KRef(pod.GetNamespace(), pod.GetName()))
		p.retryDetach(pod)
		return err
	}
	return nil
}

// detachOnce deletes the sandbox's attachments that are left.
func (p *Plugin) detachOnce(ctx context.Context, pod *api.PodSandbox) error {
	claims, release, err := p.lockPod(ctx, types.UID(pod.GetUid()))
	if err != nil {
		return err
	}
	defer release()
	var errs []error
	var left []types.UID
	for _, c := range claims {
		for i, d := range c.Devices {
			if a, ok := d.Attachment(pod.GetId()); ok {
				errs = append(errs, p.detach(ctx, c.UID, i, d, podOf(c, a.PodUID), *a))
				left = append(left, c.UID)
			}
		}
	}
	p.rewriteShared(left)
	if err = errors.Join(errs...); err == nil {
		p.epochs.forget(pod.GetId())
	}
	return err
}

// rewriteShared rewrites, in the background, the statuses of the claims a
// sandbox left that other pods still use, so that their status no longer
// names it (its interface and addresses in the pods' list, or as the
// device's latest). A claim no pod uses any more keeps its last status
// until it is unprepared: it goes with its pod, and a write per pod
// deleted would load the API server during churn for nothing.
func (p *Plugin) rewriteShared(uids []types.UID) {
	var used []types.UID
	for _, uid := range slices.Compact(uids) {
		if c, ok := p.Store.Get(uid); ok && slices.ContainsFunc(c.Devices, func(d checkpoint.Device) bool { return len(d.Attachments) > 0 }) {
			used = append(used, uid)
		}
	}
	if len(used) == 0 {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(p.logCtx, time.Minute)
		defer cancel()
		for _, uid := range used {
			p.statuses.Write(ctx, uid, nil)
		}
	}()
}

// Detach removes every attachment left on a claim (Unprepare).
func (p *Plugin) Detach(ctx context.Context, c *checkpoint.Claim) error {
	release, err := p.locks.lock(ctx, c.UID)
	if err != nil {
		return err
	}
	defer release()
	if fresh, ok := p.Store.Get(c.UID); ok {
		c = fresh
	}
	var errs []error
	for i, d := range c.Devices {
		for _, a := range d.Attachments {
			errs = append(errs, p.detach(ctx, c.UID, i, d, podOf(c, a.PodUID), a))
		}
	}
	return errors.Join(errs...)
}
