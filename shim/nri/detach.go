package nri

// Detaching: what a sandbox that stops, fails or is unprepared gives back.

import (
	"context"
	"errors"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/shim/checkpoint"
)

// rollback deletes the attachments a failed sandbox got, last first, and
// forgets them.
func (p *Plugin) rollback(ctx context.Context, sandbox, netns string, steps []Step) {
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		att := checkpoint.Attachment{PodUID: s.Pod.UID, SandboxID: sandbox, NetNS: netns, IfName: s.IfName}
		if err := p.detach(ctx, s.Claim.UID, s.DeviceIdx, *s.Device(), s.Pod, att); err != nil {
			klog.FromContext(ctx).Error(err, "Rolling back a failed attachment failed; CNI GC will remove it", "pod", klog.KRef(s.Pod.Namespace, s.Pod.Name))
		}
	}
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
	for _, c := range claims {
		for i, d := range c.Devices {
			if a, ok := d.Attachment(pod.GetId()); ok {
				errs = append(errs, p.detach(ctx, c.UID, i, d, podOf(c, a.PodUID), *a))
			}
		}
	}
	if err = errors.Join(errs...); err == nil {
		p.epochs.forget(pod.GetId())
	}
	return err
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
