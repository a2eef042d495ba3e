package nri

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containerd/nri/pkg/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/shim/checkpoint"
)

// runPodSandbox attaches the pod to its networks within NRI's budget (ctx's
// deadline; start is the hook's entry). On any failure it rolls back the
// attachments of this sandbox and returns an error, so the runtime fails the
// sandbox and the kubelet retries with a new one.
func (p *Plugin) runPodSandbox(ctx context.Context, pod *api.PodSandbox, start time.Time) error {
	if len(p.Store.ForPod(types.UID(pod.GetUid()))) == 0 {
		return nil
	}
	defer p.inflight.start()()
	budget := p.currentBudget()
	claims, release, err := p.lockPod(ctx, types.UID(pod.GetUid())) // read again: reconciliation may have attached it
	if err != nil {
		return fmt.Errorf("netclass-dra: %w", err)
	}
	defer release()
	logger := klog.FromContext(p.logCtx).WithValues("pod", klog.KRef(pod.GetNamespace(), pod.GetName()), "sandbox", short(pod.GetId()))
	steps, failed, err := p.attach(ctx, pod, claims)
	addDone := time.Since(start)
	if err != nil {
		logger.Error(err, "Attaching the pod failed; its sandbox fails and the kubelet retries", "elapsed", addDone, "budget", budget)
	} else {
		logger.V(2).Info("Pod attached", "attachments", len(steps), "elapsed", addDone, "budget", budget)
	}
	var undo []Step
	if err != nil && failed >= 0 {
		undo = steps[:failed+1] // the runtime fails the sandbox: take everything back
	}
	p.reportAsync(pod, steps, undo, err, Timing{
		Pod: types.NamespacedName{Namespace: pod.GetNamespace(), Name: pod.GetName()}, Attachments: len(steps),
		Add: addDone, CNI: cniTime(steps), Budget: budget, Err: err,
	}, start)
	if err != nil {
		return fmt.Errorf("netclass-dra: %w", err)
	}
	return nil
}

// attach runs ADD for every planned step, checkpointing before and after. On
// failure it returns the steps and the index of the one that failed; the
// caller decides what to roll back.
func (p *Plugin) attach(ctx context.Context, pod *api.PodSandbox, claims []*checkpoint.Claim) ([]Step, int, error) {
	netns := NetNS(pod)
	steps, err := PlanAround(claims, types.UID(pod.GetUid()), p.othersIn(ctx, netns, pod.GetId(), claims))
	if err != nil {
		return nil, -1, err
	}
	if netns == "" {
		return steps, -1, fmt.Errorf("pod %s/%s has no network namespace of its own (hostNetwork?): it cannot take network claims", pod.GetNamespace(), pod.GetName())
	}
	for i := range steps {
		if err := p.addStep(ctx, pod.GetId(), netns, &steps[i]); err != nil {
			return steps, i, &StepError{Step: steps[i], Err: err}
		}
	}
	return steps, len(steps), nil
}

// cniTime is the time the steps' ADDs took.
func cniTime(steps []Step) time.Duration {
	var d time.Duration
	for _, s := range steps {
		d += s.CNI
	}
	return d
}

// addStep attaches one interface, recording in s the plugins' warnings and
// the time its ADD took.
func (p *Plugin) addStep(ctx context.Context, sandbox, netns string, s *Step) error {
	dev := s.Device()
	if a, ok := dev.Attachment(sandbox); ok && a.State == checkpoint.Attached && a.IfName == s.IfName {
		return nil // already done for this sandbox
	}
	p.epochs.attaching(sandbox)
	now := time.Now().UTC().Truncate(time.Second)
	att := checkpoint.Attachment{PodUID: s.Pod.UID, SandboxID: sandbox, NetNS: netns, IfName: s.IfName, State: checkpoint.Adding, AttachedAt: &now}
	if err := p.setAttachment(*s, att); err != nil {
		return err
	}
	cniStart := time.Now()
	res, err := p.CNI.Add(ctx, dev.ConfList, cniAttachment(s.Pod, *dev, att))
	s.CNI = time.Since(cniStart)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("it did not finish within NRI's budget (raise containerd's NRI plugin_request_timeout): %w", err)
		}
		return err
	}
	att.State = checkpoint.Attached
	att.Result = &checkpoint.Result{InterfaceName: res.InterfaceName, MAC: res.MAC, IPs: res.IPs}
	if p.Fault != nil {
		p.Fault(FaultAfterAdd)
	}
	if p.Secure != nil {
		if err := p.Secure(ctx, s.Claim, dev, s.Pod, att); err != nil {
			return fmt.Errorf("secure interface %s: %w", s.IfName, err)
		}
	}
	s.Warnings = res.Warnings
	return p.setAttachment(*s, att)
}

func (p *Plugin) setAttachment(s Step, att checkpoint.Attachment) error {
	return p.Store.Update(s.Claim.UID, func(c *checkpoint.Claim) error {
		if s.DeviceIdx >= len(c.Devices) {
			return fmt.Errorf("claim %s/%s changed under the attachment", c.Namespace, c.Name)
		}
		c.Devices[s.DeviceIdx].SetAttachment(att)
		s.Claim.Devices[s.DeviceIdx].SetAttachment(att)
		return nil
	})
}

// reportAsync, after the handler returned (outside NRI's budget), rolls back
// the undo steps, writes the claims' statuses and the pod's Events, then
// reports the timing.
func (p *Plugin) reportAsync(pod *api.PodSandbox, steps, undo []Step, err error, timing Timing, start time.Time) {
	failures := map[types.UID]map[string]error{}
	var failedPod *checkpoint.Pod
	var se *StepError
	if errors.As(err, &se) {
		failures[se.Step.Claim.UID] = map[string]error{se.Step.Device().Device: se.Err}
		failedPod = &se.Step.Pod
	}
	claims := map[types.UID]bool{}
	var pods []checkpoint.Pod
	for _, s := range steps {
		if !claims[s.Claim.UID] {
			claims[s.Claim.UID] = true
			pods = append(pods, s.Pod)
		}
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(p.logCtx, time.Minute)
		defer cancel()
		p.rollbackHolding(ctx, pod.GetId(), NetNS(pod), undo)
		if failedPod != nil {
			p.Reporter.PodEvent(*failedPod, corev1.EventTypeWarning, "NetworkAttachFailed", se.Error())
		} else if err != nil && len(pods) > 0 {
			p.Reporter.PodEvent(pods[0], corev1.EventTypeWarning, "NetworkAttachFailed", err.Error())
		} else if err == nil {
			p.warn(steps)
		}
		statusStart := time.Now()
		for uid := range claims {
			p.statuses.Write(ctx, uid, failures[uid])
		}
		timing.Status = time.Since(statusStart)
		timing.Total = time.Since(start)
		klog.FromContext(ctx).V(2).Info("Pod's networks attached", "pod", timing.Pod, "attachments", timing.Attachments,
			"addMs", ms(timing.Add), "cniMs", ms(timing.CNI), "totalMs", ms(timing.Total), "statusMs", ms(timing.Status), "err", timing.Err)
		if p.Observer != nil {
			p.Observer(timing)
		}
	}()
}

// writeStatus writes a claim's status from its checkpoint as it is now; the
// status queue orders the calls.
func (p *Plugin) writeStatus(ctx context.Context, uid types.UID, failures map[string]error) {
	c, ok := p.Store.Get(uid)
	if !ok {
		return // unprepared meanwhile
	}
	if err := p.Reporter.Attached(ctx, c, failures); err != nil {
		klog.FromContext(ctx).Error(err, "Writing the claim's status failed", "claim", klog.KRef(c.Namespace, c.Name))
	}
}

// StepError is an attachment that failed.
type StepError struct {
	Step Step
	Err  error
}

func (e *StepError) Error() string {
	d := e.Step.Device()
	return fmt.Sprintf("attaching %s as %s (claim %s, request %s) failed: %v", d.Network, e.Step.IfName, e.Step.Claim.Name, d.Request, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }
