package nri

import (
	"context"
	"errors"
	"os"
	"slices"
	"time"

	"github.com/containerd/nri/pkg/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/cni"
)

// synchronize starts reconciling the checkpoint with the sandboxes the
// runtime has; it returns at once (the work can outlast NRI's budget).
func (p *Plugin) synchronize(_ context.Context, pods []*api.PodSandbox, _ []*api.Container) ([]*api.ContainerUpdate, error) {
	epoch := p.epochs.snapshot() // the list is as of now, not of when the work runs
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(p.logCtx, 5*time.Minute)
		defer cancel()
		p.reconcile(ctx, pods, epoch)
	}()
	return nil, nil
}

// Reconcile makes the checkpoint agree with the running sandboxes:
// attachments of sandboxes that are gone are deleted, interrupted ADDs are
// adopted from libcni's result cache or redone, pods that started while the
// daemon was away are attached now; then, once per process, CNI GC runs with
// every valid attachment. pods is the runtime's list as of now.
func (p *Plugin) Reconcile(ctx context.Context, pods []*api.PodSandbox) {
	p.reconcile(ctx, pods, p.epochs.snapshot())
}

// reconcile works from a list taken at the start of epoch: attachments made
// since are newer than the list and never taken for gone. It holds one
// claim's lock at a time (one pod's claims' when attaching it), so sandboxes
// of other claims go on meanwhile; CNI GC holds every claim's.
func (p *Plugin) reconcile(ctx context.Context, pods []*api.PodSandbox, epoch uint64) {
	logger := klog.FromContext(ctx)
	running := map[string]*api.PodSandbox{}
	for _, pod := range pods {
		if ns := NetNS(pod); ns != "" && exists(ns) {
			running[pod.GetId()] = pod
		}
	}
	dropped, adopted := p.dropStale(ctx, running, epoch)
	attached, failed := p.attachMissing(ctx, running)
	logger.Info("Reconciled attachments with the runtime", "sandboxes", len(running),
		"deleted", dropped, "adopted", adopted, "attachedLate", attached, "failed", failed)
	p.gcOnce.Do(func() {
		release, err := p.locks.lockAll(ctx)
		if err != nil {
			logger.Error(err, "CNI GC skipped")
			return
		}
		defer release()
		p.gc(ctx)
	})
}

// dropStale deletes attachments whose sandbox is gone and settles the ones
// an interrupted ADD left in state Adding. An attachment is gone only when
// its sandbox is not in the list, it was made before the list (epoch), and
// its network namespace no longer exists.
func (p *Plugin) dropStale(ctx context.Context, running map[string]*api.PodSandbox, epoch uint64) (dropped, adopted int) {
	for _, listed := range p.Store.List() {
		release, err := p.locks.lock(ctx, listed.UID)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Reconciliation stopped")
			return dropped, adopted
		}
		d, a := p.dropStaleOf(ctx, listed.UID, running, epoch)
		release()
		if d > 0 {
			p.rewriteShared([]types.UID{listed.UID})
		}
		dropped, adopted = dropped+d, adopted+a
	}
	return dropped, adopted
}

// dropStaleOf is dropStale for one claim, whose lock the caller holds.
func (p *Plugin) dropStaleOf(ctx context.Context, uid types.UID, running map[string]*api.PodSandbox, epoch uint64) (dropped, adopted int) {
	c, ok := p.Store.Get(uid)
	if !ok {
		return 0, 0 // unprepared meanwhile
	}
	for i, d := range c.Devices {
		for _, a := range d.Attachments {
			pod := podOf(c, a.PodUID)
			if _, ok := running[a.SandboxID]; !ok {
				if reason := p.maybeAlive(a, epoch); reason != "" {
					klog.FromContext(ctx).V(2).Info("Kept an attachment missing from the runtime's list", "claim", klog.KRef(c.Namespace, c.Name),
						"sandbox", short(a.SandboxID), "reason", reason)
					continue
				}
				if err := p.detach(ctx, c.UID, i, d, pod, a); err != nil {
					klog.FromContext(ctx).Error(err, "Deleting the attachment of a gone sandbox failed", "claim", klog.KRef(c.Namespace, c.Name))
					continue
				}
				p.epochs.forget(a.SandboxID)
				dropped++
				continue
			}
			if a.State != checkpoint.Adding {
				continue
			}
			if p.adopt(ctx, c, i, d, pod, a) {
				adopted++
			}
		}
	}
	return dropped, adopted
}

// maybeAlive says why an attachment missing from the runtime's list may still
// belong to a live sandbox, or "" when it is gone.
func (p *Plugin) maybeAlive(a checkpoint.Attachment, epoch uint64) string {
	switch {
	case p.epochs.since(a.SandboxID, epoch):
		return "attached after the runtime listed its sandboxes"
	case a.NetNS != "" && exists(a.NetNS):
		return "its network namespace still exists"
	}
	return ""
}

// adopt settles an attachment whose ADD was interrupted: a cached result
// means ADD completed, and the attachment is secured (its policy, which
// the crash may have kept from it: its port stayed closed meanwhile) and
// kept; otherwise the half-done attachment is deleted and attachMissing
// redoes it. An adopted attachment that cannot be secured now stays
// closed until the agent's next sync secures it.
func (p *Plugin) adopt(ctx context.Context, c *checkpoint.Claim, idx int, d checkpoint.Device, pod checkpoint.Pod, a checkpoint.Attachment) bool {
	res, ok, err := p.CNI.Cached(d.ConfList, cniAttachment(pod, d, a))
	if err == nil && ok {
		a.State = checkpoint.Attached
		a.Result = &checkpoint.Result{InterfaceName: res.InterfaceName, MAC: res.MAC, IPs: res.IPs}
		if p.Secure != nil {
			if serr := p.Secure(ctx, c, &d, pod, a); serr != nil {
				klog.FromContext(ctx).Error(serr, "Securing an adopted attachment failed; its port stays closed until the agent secures it",
					"claim", klog.KRef(c.Namespace, c.Name), "interface", a.IfName)
			}
		}
		err = p.Store.Update(c.UID, func(rec *checkpoint.Claim) error {
			rec.Devices[idx].SetAttachment(a)
			return nil
		})
		if err == nil {
			return true
		}
	}
	if err := p.detach(ctx, c.UID, idx, d, pod, a); err != nil {
		klog.FromContext(ctx).Error(err, "Deleting an interrupted attachment failed", "claim", klog.KRef(c.Namespace, c.Name))
	}
	return false
}

// attachMissing attaches running pods whose attachments are missing (the
// daemon was down or disconnected when their sandbox started).
func (p *Plugin) attachMissing(ctx context.Context, running map[string]*api.PodSandbox) (attached, failed int) {
	for id, pod := range running {
		if len(p.Store.ForPod(types.UID(pod.GetUid()))) == 0 {
			continue
		}
		claims, release, err := p.lockPod(ctx, types.UID(pod.GetUid()))
		if err != nil {
			klog.FromContext(ctx).Error(err, "Reconciliation stopped")
			return attached, failed
		}
		done, err := p.attachMissingOf(ctx, id, pod, claims)
		release()
		switch {
		case err != nil:
			failed++
		case done:
			attached++
		}
	}
	return attached, failed
}

// attachMissingOf attaches one running pod if it misses attachments; the
// caller holds its claims' locks.
func (p *Plugin) attachMissingOf(ctx context.Context, id string, pod *api.PodSandbox, claims []*checkpoint.Claim) (bool, error) {
	steps, err := Plan(claims, types.UID(pod.GetUid()))
	if err != nil {
		return false, err
	}
	if !slices.ContainsFunc(steps, func(s Step) bool {
		a, ok := s.Device().Attachment(id)
		return !ok || a.State != checkpoint.Attached
	}) {
		return false, nil
	}
	done, failedIdx, err := p.attach(ctx, pod, claims)
	if err != nil && failedIdx >= 0 {
		// The pod runs: keep what it has, take back the half-done one.
		p.rollback(ctx, id, NetNS(pod), done[failedIdx:failedIdx+1])
	}
	p.reportLate(ctx, done, err)
	return err == nil, err
}

func (p *Plugin) reportLate(ctx context.Context, steps []Step, err error) {
	failures := map[types.UID]map[string]error{}
	var se *StepError
	if errors.As(err, &se) {
		failures[se.Step.Claim.UID] = map[string]error{se.Step.Device().Device: se.Err}
		p.Reporter.PodEvent(se.Step.Pod, corev1.EventTypeWarning, "NetworkAttachFailed", se.Error())
	}
	seen := map[types.UID]bool{}
	for _, s := range steps {
		if !seen[s.Claim.UID] {
			seen[s.Claim.UID] = true
			p.statuses.Write(ctx, s.Claim.UID, failures[s.Claim.UID])
		}
	}
}

// gc runs CNI GC once per network with every attachment the checkpoint holds,
// unless GCBlocked says the checkpoint may be incomplete.
func (p *Plugin) gc(ctx context.Context) {
	if p.GCBlocked != "" {
		klog.FromContext(ctx).Info("CNI GC skipped: only what the checkpoint positively knows is stale may be removed", "reason", p.GCBlocked)
		return
	}
	type net struct {
		conf  []byte
		valid []cni.Attachment
	}
	nets := map[string]*net{}
	for _, c := range p.Store.List() {
		for _, d := range c.Devices {
			name := d.Network.CNIName()
			n := nets[name]
			if n == nil {
				n = &net{conf: d.ConfList}
				nets[name] = n
			}
			for _, a := range d.Attachments {
				n.valid = append(n.valid, cniAttachment(podOf(c, a.PodUID), d, a))
			}
		}
	}
	for name, n := range nets {
		if err := p.CNI.GC(ctx, n.conf, n.valid); err != nil {
			klog.FromContext(ctx).Error(err, "CNI GC failed", "network", name)
			continue
		}
		klog.FromContext(ctx).V(2).Info("CNI GC done", "network", name, "validAttachments", len(n.valid))
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
