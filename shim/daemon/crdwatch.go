package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// laterKind is a policy kind whose CRD the API server did not serve when
// the daemon started (its informer was not made).
type laterKind struct {
	kind, groupVersion, resource string
}

// resourceLister is the part of discovery the watch needs.
type resourceLister interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// crdPollPeriod is how often the daemon asks whether a missing policy
// kind is served yet.
const crdPollPeriod = 30 * time.Second

// ErrRestartForKind is the cause of the daemon's end when a policy kind it
// started without became served: its informers and the agent are wired at
// start, so the daemon returns this error for its container to be
// restarted (running pods keep their attachments across a restart), and
// the new daemon enforces the kind.
var ErrRestartForKind = errors.New("a policy kind became served")

// crdKickInterval bounds how often a kick makes awaitServed ask
// discovery: what kicks it (a pod's annotation) is a tenant's to edit.
const crdKickInterval = 5 * time.Second

// awaitServed asks discovery every period whether one of the kinds is
// served, and returns the first that is; ctx's end returns its error.
// Discovery's errors are retried at the next period. A kick asks at once,
// unless it asked less than kickEvery before.
func awaitServed(ctx context.Context, dc resourceLister, kinds []laterKind, period time.Duration, kick <-chan struct{}, kickEvery time.Duration) (laterKind, error) {
	t := time.NewTicker(period)
	defer t.Stop()
	var asked time.Time
	for {
		select {
		case <-ctx.Done():
			return laterKind{}, ctx.Err()
		case <-t.C:
		case <-kick:
			if time.Since(asked) < kickEvery {
				continue
			}
		}
		asked = time.Now()
		for _, k := range kinds {
			if ok, err := serves(dc, k.groupVersion, k.resource); err == nil && ok {
				return k, nil
			}
		}
	}
}

// watchLaterKinds ends the daemon (cancel, with ErrRestartForKind as the
// cause) when one of the kinds it started without becomes served.
func (d *Daemon) watchLaterKinds(ctx context.Context, cancel context.CancelCauseFunc) {
	if len(d.later) == 0 {
		return
	}
	k, err := awaitServed(ctx, d.kube.Discovery(), d.later, crdPollPeriod, nil, 0)
	if err != nil {
		return
	}
	cancel(fmt.Errorf("%s (%s) is served now: restarting to enforce it: %w", k.kind, k.groupVersion, ErrRestartForKind))
}
