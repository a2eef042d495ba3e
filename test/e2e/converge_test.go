//go:build testbed

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/peers"
	"github.com/netclass-dev/netclass/test/e2e/harness"
)

// What the tests of the agent across a SIGKILL share: the storm around the
// kill, and the walk over node 1's attachments that compares each with
// what the API objects say.

// stormAcrossKill runs the storm's steps from first up to per while
// netclass-dra runs, SIGKILLs it, runs the next per steps while it is
// down, restarts it and runs per more.
func stormAcrossKill(t *testing.T, d *harness.DRA, first, per int, step func(int)) {
	t.Helper()
	for i := first; i < per; i++ {
		step(i)
	}
	kill(t, d)
	for i := per; i < 2*per; i++ {
		step(i)
	}
	restart(t, d)
	for i := 2 * per; i < 3*per; i++ {
		step(i)
	}
}

// eachAttachment calls fn for every attachment node 1's checkpoint records
// in the namespaces, with its pod as the API has it now, and joins what fn
// returns; no attachment at all is an error too.
func eachAttachment(ctx context.Context, e *harness.Env, namespaces []string,
	fn func(pod *corev1.Pod, dev checkpoint.Device, at checkpoint.Attachment) error) error {
	claims, err := e.Checkpoint()
	if err != nil {
		return err
	}
	var errs []error
	checked := 0
	for _, c := range claims {
		if !slices.Contains(namespaces, c.Namespace) {
			continue
		}
		for _, dev := range c.Devices {
			for _, at := range dev.Attachments {
				checked++
				pod, err := e.Kube.CoreV1().Pods(c.Namespace).Get(ctx, podName(c, at), metav1.GetOptions{})
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if err := fn(pod, dev, at); err != nil {
					errs = append(errs, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
				}
			}
		}
	}
	if checked == 0 {
		errs = append(errs, fmt.Errorf("no attachment of namespaces %v in node 1's checkpoint", namespaces))
	}
	return errors.Join(errs...)
}

func podName(c *checkpoint.Claim, at checkpoint.Attachment) string {
	for _, p := range c.Pods {
		if p.UID == at.PodUID {
			return p.Name
		}
	}
	return ""
}

// apiResolver resolves peers from the API server, as netclass-dra does from
// its caches.
func apiResolver(ctx context.Context, e *harness.Env) peers.Resolver {
	return peers.Resolver{API: peers.ClientAPI{Client: e.Kube}, Context: func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 10*time.Second)
	}}
}
