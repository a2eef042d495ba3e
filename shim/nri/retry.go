package nri

import (
	"context"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// retryDetach retries the DEL of a stopped sandbox's attachments in the
// background, waiting RetryBase, then twice as long each time up to a minute,
// until nothing of the sandbox is left (DEL succeeded, or Unprepare or a
// reconciliation removed it) or the daemon stops.
func (p *Plugin) retryDetach(pod *api.PodSandbox) {
	base := p.RetryBase
	if base <= 0 {
		base = time.Second
	}
	backoff := wait.Backoff{Duration: base, Factor: 2, Cap: time.Minute, Steps: 1 << 30}
	logger := klog.FromContext(p.logCtx).WithValues("pod", klog.KRef(pod.GetNamespace(), pod.GetName()), "sandbox", short(pod.GetId()))
	p.retries.Add(1)
	go func() {
		defer p.retries.Done()
		for attempt := 1; ; attempt++ {
			timer := time.NewTimer(backoff.Step())
			select {
			case <-p.logCtx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			ctx, cancel := context.WithTimeout(p.logCtx, time.Minute)
			err := p.detachOnce(ctx, pod)
			cancel()
			if err == nil {
				logger.Info("Detached a stopped sandbox after retrying", "attempts", attempt)
				return
			}
			logger.Error(err, "Detaching a stopped sandbox failed again", "attempt", attempt)
		}
	}()
}

// WaitRetries waits for the background DEL retries to end (they end when
// they succeed or when the plugin's context is done).
func (p *Plugin) WaitRetries() { p.retries.Wait() }
