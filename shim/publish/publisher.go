package publish

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/shim/network"
)

// Source computes the networks offered on this node.
type Source interface {
	Collect() ([]network.Network, []network.Skip, error)
}

// VFSource lists the VFs of a PF (SR-IOV networks publish their VFs).
type VFSource interface {
	VFs(pf string) ([]VF, error)
}

// Sink publishes a driver's pools (the kubelet plugin helper).
type Sink interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// Options tune a Publisher.
type Options struct {
	// Pool is the pool name, the node's name.
	Pool string
	// Mode is the starting mode; Shared falls back to Slots by itself when the
	// API server drops allowMultipleAllocations.
	Mode Mode
	// Slots is the number of devices per network in Slots mode (default 16).
	Slots int
	// Debounce gathers changes arriving together into one publication (default 100 ms).
	Debounce time.Duration
	// Resync recomputes periodically, for node devices appearing or going (default 10 s).
	Resync time.Duration
	// VFs lists SR-IOV VFs; nil publishes no SR-IOV network.
	VFs VFSource
	// Changed, when set, is called after a publication that changed what a
	// device stands for (a network offered or withdrawn, its labels or
	// config changed): the node's rule agent reads its targets' networks
	// from Lookup, so a network's new labels must reach its NetworkQoS
	// selectors without waiting for another trigger.
	Changed func()
}

// Publisher keeps the node's ResourceSlices in line with the network objects.
type Publisher struct {
	source  Source
	opts    Options
	trigger chan struct{}

	mu    sync.RWMutex
	mode  Mode
	table map[string]network.Offer
	skips map[string]string // reference → last reason logged
	// published is closed and replaced after each publication (for waiters).
	published chan struct{}
}

// New returns a Publisher; call Run to start it.
func New(source Source, opts Options) *Publisher {
	if opts.Slots <= 0 {
		opts.Slots = 16
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 100 * time.Millisecond
	}
	if opts.Resync <= 0 {
		opts.Resync = 10 * time.Second
	}
	return &Publisher{
		source: source, opts: opts, mode: opts.Mode,
		trigger:   make(chan struct{}, 1),
		table:     map[string]network.Offer{},
		skips:     map[string]string{},
		published: make(chan struct{}),
	}
}

// Trigger asks for a recomputation; it never blocks.
func (p *Publisher) Trigger() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Lookup returns what a published device stands for.
func (p *Publisher) Lookup(device string) (network.Offer, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n, ok := p.table[device]
	return n, ok
}

// Mode returns the current publishing mode.
func (p *Publisher) Mode() Mode {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.mode
}

// Published returns a channel closed at the next publication.
func (p *Publisher) Published() <-chan struct{} {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.published
}

// Prime computes which device stands for which network without publishing,
// so Lookup answers before the first publication.
func (p *Publisher) Prime(ctx context.Context) error {
	_, table, _, err := p.compute(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.table = table
	p.mu.Unlock()
	return nil
}

func (p *Publisher) compute(ctx context.Context) ([]resourceapi.Device, map[string]network.Offer, int, error) {
	nets, skips, err := p.source.Collect()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("collect networks: %w", err)
	}
	vfs, vfSkips := p.listVFs(nets)
	devices, table, dups := Build(nets, vfs, p.Mode(), p.opts.Slots)
	p.logSkips(ctx, append(append(skips, vfSkips...), dups...))
	return devices, table, len(nets), nil
}

// listVFs reads the VFs of every PF an SR-IOV network uses.
func (p *Publisher) listVFs(nets []network.Network) (map[string][]VF, []network.Skip) {
	vfs := map[string][]VF{}
	var skips []network.Skip
	for _, n := range nets {
		if n.Type != netconf.TypeSRIOV || n.Master == "" {
			continue
		}
		if _, done := vfs[n.Master]; done {
			continue
		}
		if p.opts.VFs == nil {
			skips = append(skips, network.Skip{Ref: n.Ref, Reason: "NoVFSource", Message: "SR-IOV VFs cannot be listed here"})
			continue
		}
		list, err := p.opts.VFs.VFs(n.Master)
		if err != nil {
			skips = append(skips, network.Skip{Ref: n.Ref, Reason: "NoVFs", Message: err.Error()})
			continue
		}
		vfs[n.Master] = list
	}
	return vfs, skips
}

// Sync computes and publishes once.
func (p *Publisher) Sync(ctx context.Context, sink Sink) error {
	devices, table, nets, err := p.compute(ctx)
	if err != nil {
		return err
	}
	resources := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		p.opts.Pool: {Slices: Slices(devices, MaxDevicesPerSlice)},
	}}
	if err := sink.PublishResources(ctx, resources); err != nil {
		return fmt.Errorf("publish %d devices in pool %s: %w", len(devices), p.opts.Pool, err)
	}
	p.mu.Lock()
	changed := !maps.EqualFunc(p.table, table, func(a, b network.Offer) bool { return reflect.DeepEqual(a, b) })
	p.table = table
	close(p.published)
	p.published = make(chan struct{})
	p.mu.Unlock()
	if changed {
		klog.FromContext(ctx).V(2).Info("Published networks", "pool", p.opts.Pool, "networks", nets, "devices", len(devices), "mode", p.Mode())
		if p.opts.Changed != nil {
			p.opts.Changed()
		}
	}
	return nil
}

// Run publishes now, then after every trigger (debounced) and every resync
// period, until ctx ends.
func (p *Publisher) Run(ctx context.Context, sink Sink) {
	logger := klog.FromContext(ctx)
	resync := time.NewTicker(p.opts.Resync)
	defer resync.Stop()
	for {
		if err := p.Sync(ctx, sink); err != nil {
			logger.Error(err, "Publishing networks failed; retrying at the next change or resync")
		}
		select {
		case <-ctx.Done():
			return
		case <-resync.C:
		case <-p.trigger:
			select { // let changes that come together land in one publication
			case <-ctx.Done():
				return
			case <-time.After(p.opts.Debounce):
			}
		}
	}
}

// HandleError inspects an error of the ResourceSlice controller. When the API
// server dropped allowMultipleAllocations (DRAConsumableCapacity off), it
// switches to Slots mode, republishes, and reports true.
func (p *Publisher) HandleError(ctx context.Context, err error) bool {
	var dropped *resourceslice.DroppedFieldsError
	if !errors.As(err, &dropped) || !droppedSharing(dropped) {
		return false
	}
	p.mu.Lock()
	switched := p.mode != Slots
	p.mode = Slots
	p.mu.Unlock()
	if switched {
		klog.FromContext(ctx).Info("The API server drops allowMultipleAllocations (DRAConsumableCapacity is off): publishing each network as single-use device slots instead",
			"slotsPerNetwork", p.opts.Slots)
		p.Trigger()
	}
	return true
}

func droppedSharing(err *resourceslice.DroppedFieldsError) bool {
	if err.DesiredSlice == nil || err.ActualSlice == nil {
		return false
	}
	want, got := err.DesiredSlice.Spec.Devices, err.ActualSlice.Spec.Devices
	for i := 0; i < len(want) && i < len(got); i++ {
		if ptr.Deref(want[i].AllowMultipleAllocations, false) && !ptr.Deref(got[i].AllowMultipleAllocations, false) {
			return true
		}
	}
	return false
}

// logSkips logs each network that is not offered once per reason.
func (p *Publisher) logSkips(ctx context.Context, skips []network.Skip) {
	logger := klog.FromContext(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := make(map[string]string, len(skips))
	for _, s := range skips {
		key := s.Ref.Class + "/" + s.Ref.String()
		seen[key] = s.Reason
		if p.skips[key] != s.Reason {
			logger.V(1).Info("Network not offered on this node", "network", s.Ref.String(), "networkClass", s.Ref.Class, "reason", s.Reason, "message", s.Message)
		}
	}
	p.skips = seen
}
