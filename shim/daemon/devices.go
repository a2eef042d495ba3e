package daemon

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/shim/nadfiles"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/nodedevices"
)

// deviceInterval is how often the node engine runs without an event: a
// network that is gone loses its devices when its last pod leaves, which
// brings no event of its own.
const deviceInterval = 10 * time.Second

// deviceLoop runs the node engine on the networks offered on the node: after
// every computation of them (the publisher's informer-driven runs) and every
// deviceInterval. The latest computation wins; runs never overlap.
type deviceLoop struct {
	engine *nodedevices.Engine
	poke   chan struct{}
	// files keeps the rendered lists of generated NADs (nadfiles) at the
	// networks offered, after their devices are set up.
	files nadfiles.Dir

	mu      sync.Mutex
	latest  []network.Network
	offered bool
	devices map[string][]string // by ClusterNetwork, from the last run
}

func newDeviceLoop(engine *nodedevices.Engine, files nadfiles.Dir) *deviceLoop {
	return &deviceLoop{engine: engine, files: files, poke: make(chan struct{}, 1)}
}

// Offer hands the loop the networks now offered on the node.
func (l *deviceLoop) Offer(nets []network.Network) {
	l.mu.Lock()
	l.latest, l.offered = nets, true
	l.mu.Unlock()
	poke(l.poke)
}

// Devices returns the node devices of the networks of a ClusterNetwork, as
// the last run left them.
func (l *deviceLoop) Devices(clusterNetwork string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.devices[clusterNetwork])
}

// Run syncs until ctx ends; changed is poked when the devices changed.
func (l *deviceLoop) Run(ctx context.Context, changed chan struct{}) {
	logger := klog.FromContext(ctx)
	tick := time.NewTicker(deviceInterval)
	defer tick.Stop()
	lastErr, lastFilesErr := "", ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.poke:
		case <-tick.C:
		}
		l.mu.Lock()
		nets, offered := l.latest, l.offered
		l.mu.Unlock()
		if !offered {
			continue // nothing computed yet: never remove devices on an empty start
		}
		res, err := l.engine.Sync(ctx, nets)
		if msg := errText(err); msg != lastErr {
			if err != nil {
				logger.Error(err, "Setting up the node's network devices failed")
			}
			lastErr = msg
		}
		if msg := errText(l.files.Sync(nets)); msg != lastFilesErr {
			if msg != "" {
				logger.Error(nil, "Writing the rendered configurations of generated NADs failed", "problem", msg)
			}
			lastFilesErr = msg
		}
		if l.record(nets, res) {
			poke(changed)
		}
	}
}

// record keeps the devices per ClusterNetwork; it reports whether they changed.
func (l *deviceLoop) record(nets []network.Network, res nodedevices.Result) bool {
	byCluster := map[string][]string{}
	for _, n := range nets {
		if devs, ok := res.Devices[n.Ref.CNIName()]; ok && n.ClusterNetwork != "" {
			byCluster[n.ClusterNetwork] = append(byCluster[n.ClusterNetwork], devs...)
		}
	}
	for k := range byCluster {
		slices.Sort(byCluster[k])
		byCluster[k] = slices.Compact(byCluster[k])
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	same := len(l.devices) == len(byCluster)
	for k, v := range byCluster {
		same = same && slices.Equal(l.devices[k], v)
	}
	l.devices = byCluster
	return !same
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
