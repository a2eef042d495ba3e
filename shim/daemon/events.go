package daemon

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	ncscheme "github.com/netclass-dev/netclass/api/generated/clientset/versioned/scheme"
)

// newRecorder starts the daemon's event broadcaster (d.events) and returns
// its recorder, which knows Kubernetes' types and netclass's: an Event on a
// NetworkQoS (or any object of a kind its scheme lacks) would otherwise be
// dropped, with only a log line saying so.
func (d *Daemon) newRecorder(ctx context.Context) (record.EventRecorder, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ncscheme.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("event scheme: %w", err)
		}
	}
	d.events = record.NewBroadcaster(record.WithContext(ctx))
	return d.events.NewRecorder(scheme, corev1.EventSource{Component: "netclass-dra", Host: d.cfg.NodeName}), nil
}
