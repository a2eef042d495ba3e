package nri

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"
)

// HookObserver is told how each NRI hook was answered (shim/metrics).
type HookObserver interface {
	ObserveHook(hook, result string, took time.Duration)
}

// Outcomes of a hook given to HookObserver.
const (
	HookSuccess = "success"
	HookError   = "error"
	// HookSkipped: the sandbox has no netclass attachment, nothing was done.
	HookSkipped = "skipped"
)

// RunPodSandbox tells the sandbox watcher and attaches the pod to its
// networks (runPodSandbox), both within one share of NRI's budget, counted
// from the hook's entry: the runtime gives the whole hook that budget.
func (p *Plugin) RunPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(p.currentBudget()-p.margin()))
	defer cancel()
	p.sandboxStarted(ctx, pod)
	if err := p.joinShared(ctx, pod); err != nil {
		p.observe("RunPodSandbox", HookError, start)
		return err
	}
	return p.hook("RunPodSandbox", pod, func() error { return p.runPodSandbox(ctx, pod, start) }, false)
}

// StopPodSandbox detaches the sandbox's attachments. A failed DEL is retried
// in the background and not returned: the runtime would only log it.
func (p *Plugin) StopPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	p.sandboxStopped(pod)
	return p.hook("StopPodSandbox", pod, func() error { return p.detachSandbox(ctx, pod) }, true)
}

// RemovePodSandbox detaches whatever Stop left (usually nothing).
func (p *Plugin) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	p.sandboxStopped(pod)
	return p.hook("RemovePodSandbox", pod, func() error { return p.detachSandbox(ctx, pod) }, true)
}

// Synchronize starts the reconciliation with the runtime's sandboxes and
// returns at once (synchronize).
func (p *Plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, containers []*api.Container) ([]*api.ContainerUpdate, error) {
	start := time.Now()
	p.sandboxesSynchronized(pods)
	updates, err := p.synchronize(ctx, pods, containers)
	p.observe("Synchronize", outcome(err), start)
	return updates, err
}

// hook runs one sandbox hook and reports its outcome; a sandbox without
// netclass attachments is skipped. quiet hooks answer the runtime nil
// whatever happened.
func (p *Plugin) hook(name string, pod *api.PodSandbox, run func() error, quiet bool) error {
	start := time.Now()
	if len(p.Store.ForPod(types.UID(pod.GetUid()))) == 0 {
		p.observe(name, HookSkipped, start)
		return nil
	}
	err := run()
	p.observe(name, outcome(err), start)
	if quiet {
		return nil
	}
	return err
}

func (p *Plugin) observe(hook, result string, start time.Time) {
	if p.Hooks != nil {
		p.Hooks.ObserveHook(hook, result, time.Since(start))
	}
}

func outcome(err error) string {
	if err != nil {
		return HookError
	}
	return HookSuccess
}

// joinShared records the pod with the claims prepared for other pods it now
// shares (JoinShared); failing, the sandbox fails and the kubelet retries.
func (p *Plugin) joinShared(ctx context.Context, pod *api.PodSandbox) error {
	if p.JoinShared == nil {
		return nil
	}
	err := p.JoinShared(ctx, types.NamespacedName{Namespace: pod.GetNamespace(), Name: pod.GetName()}, types.UID(pod.GetUid()))
	if err != nil {
		return fmt.Errorf("netclass-dra: a claim the pod shares with others: %w", err)
	}
	return nil
}
