package metrics

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/shim/cni"
	"github.com/netclass-dev/netclass/shim/status"
)

// DRAPlugin returns p with its Prepare and Unprepare calls measured.
func (m *DRA) DRAPlugin(p kubeletplugin.DRAPlugin) kubeletplugin.DRAPlugin {
	if m == nil {
		return p
	}
	return draPlugin{DRAPlugin: p, m: m}
}

type draPlugin struct {
	kubeletplugin.DRAPlugin
	m *DRA
}

func (d draPlugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	start := time.Now()
	res, err := d.DRAPlugin.PrepareResourceClaims(ctx, claims)
	counts := map[string]int{}
	for _, c := range claims {
		r, ok := res[c.UID]
		counts[outcome(err, ok, r.Err)]++
	}
	d.m.observeClaims(Prepare, counts, err, time.Since(start))
	return res, err
}

func (d draPlugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	start := time.Now()
	res, err := d.DRAPlugin.UnprepareResourceClaims(ctx, claims)
	counts := map[string]int{}
	for _, c := range claims {
		cerr, ok := res[c.UID]
		counts[outcome(err, ok, cerr)]++
	}
	d.m.observeClaims(Unprepare, counts, err, time.Since(start))
	return res, err
}

// outcome is a claim's result label: an error when the call failed, when
// the claim got no answer (the kubelet plugin helper reports that as an
// error) or when the claim's own answer is an error.
func outcome(call error, answered bool, claim error) string {
	if call != nil || !answered || claim != nil {
		return Error
	}
	return Success
}

// CNI is the CNI runner netclass-dra's NRI plugin uses (nri.CNI).
type CNI interface {
	Add(ctx context.Context, confList []byte, a cni.Attachment) (cni.Result, error)
	Del(ctx context.Context, confList []byte, a cni.Attachment) error
	GC(ctx context.Context, confList []byte, valid []cni.Attachment) error
	Cached(confList []byte, a cni.Attachment) (cni.Result, bool, error)
}

// CNI returns next with its ADD, DEL and GC executions measured (reading
// libcni's result cache executes nothing and is not).
func (m *DRA) CNI(next CNI) CNI {
	if m == nil {
		return next
	}
	return cniRunner{CNI: next, m: m}
}

type cniRunner struct {
	CNI
	m *DRA
}

func (c cniRunner) Add(ctx context.Context, confList []byte, a cni.Attachment) (cni.Result, error) {
	start := time.Now()
	res, err := c.CNI.Add(ctx, confList, a)
	c.m.observeCNI(MainPlugin(confList), "ADD", err, time.Since(start))
	return res, err
}

func (c cniRunner) Del(ctx context.Context, confList []byte, a cni.Attachment) error {
	start := time.Now()
	err := c.CNI.Del(ctx, confList, a)
	c.m.observeCNI(MainPlugin(confList), "DEL", err, time.Since(start))
	return err
}

func (c cniRunner) GC(ctx context.Context, confList []byte, valid []cni.Attachment) error {
	start := time.Now()
	err := c.CNI.GC(ctx, confList, valid)
	c.m.observeCNI(MainPlugin(confList), "GC", err, time.Since(start))
	return err
}

// OtherPlugin is the plugin label of a configuration list whose main plugin
// is not a netclass main plugin (it keeps the label's values bounded).
const OtherPlugin = "other"

// MainPlugin is the type of the first plugin of a configuration list, one
// of netconf.MainTypes, else OtherPlugin.
func MainPlugin(confList []byte) string {
	var list struct {
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	if json.Unmarshal(confList, &list) != nil || len(list.Plugins) == 0 || !slices.Contains(netconf.MainTypes(), list.Plugins[0].Type) {
		return OtherPlugin
	}
	return list.Plugins[0].Type
}

// Sink is where the publisher puts the node's ResourceSlices (publish.Sink).
type Sink interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// Sink returns next with its publications counted and the devices of the
// last successful one kept.
func (m *DRA) Sink(next Sink) Sink {
	if m == nil {
		return next
	}
	return sink{next: next, m: m}
}

type sink struct {
	next Sink
	m    *DRA
}

func (s sink) PublishResources(ctx context.Context, resources resourceslice.DriverResources) error {
	err := s.next.PublishResources(ctx, resources)
	n := 0
	for _, pool := range resources.Pools {
		for _, sl := range pool.Slices {
			n += len(sl.Devices)
		}
	}
	s.m.observePublication(n, err)
	return err
}

// StatusWriter writes a claim's status entries (status.StatusWriter).
type StatusWriter interface {
	Write(ctx context.Context, namespace, name string, entries []status.Entry) error
}

// StatusWriter returns next with its writes counted and timed.
func (m *DRA) StatusWriter(next StatusWriter) StatusWriter {
	if m == nil {
		return next
	}
	return statusWriter{next: next, m: m}
}

type statusWriter struct {
	next StatusWriter
	m    *DRA
}

func (w statusWriter) Write(ctx context.Context, namespace, name string, entries []status.Entry) error {
	start := time.Now()
	err := w.next.Write(ctx, namespace, name, entries)
	w.m.observeStatus(err, time.Since(start))
	return err
}
