package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/nadfile"
	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/multus"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/ruleagent"
	"github.com/netclass-dev/netclass/shim/sandboxes"
)

// ForeignPollInterval is how often the plugins' record store is looked at
// for attachments appearing or going (each change asks the agent for a
// sync; NRI's sandbox events ask too).
const ForeignPollInterval = time.Second

// foreignAttachments gives the agent the attachments netclass plugins made
// for another CNI caller (Multus): the plugins' records in
// cfg.ForeignRecordDir, matched to the node's sandboxes and pods, named
// by the NAD of the pod's network-status. Off when the directory is "".
func (d *Daemon) foreignAttachments(ctx context.Context, sbs *sandboxes.Record, events record.EventRecorder) {
	dir := d.cfg.ForeignRecordDir
	if dir == "" {
		return
	}
	src := &foreignSource{dir: dir, sandboxes: sbs.List, claims: d.runtime.Claims,
		pods: nodePods{d.podFac.Core().V1().Pods().Lister()}, nads: d.nadLook,
		unnamed: newUnnamedReporter(events, d.qos.Trigger)}
	d.qos.Foreign = ruleagent.NewForeign(func() []ruleagent.ForeignAttachment { return src.list(ctx) }, qosport.RemovePortRules)
	go watchRecords(ctx, dir, ForeignPollInterval, d.qos.Trigger)
}

// foreignSource reads the foreign attachments.
type foreignSource struct {
	dir       string
	sandboxes func() []sandboxes.Sandbox
	claims    func() []*checkpoint.Claim
	pods      ruleagent.Pods
	// nads is the NAD cache a network-status entry is checked against.
	nads *nadLookup
	// unnamed tells the pods whose attachments wait too long for their
	// network-status (nil: nobody).
	unnamed *unnamedReporter
}

func (s *foreignSource) list(ctx context.Context) []ruleagent.ForeignAttachment {
	recs, err := readRecords(s.dir)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading the netclass plugins' records failed; the attachments of the unreadable ones are left out", "dir", s.dir)
	}
	out, waiting := matchForeign(recs, s.sandboxes(), claimed(s.claims()), s.pods.Pod, s.mismatch)
	if s.unnamed != nil {
		s.unnamed.observe(waiting)
	}
	for i := range out {
		if !out[i].Unnamed {
			out[i].Backing = s.backing(out[i].NAD)
		}
	}
	return out
}

// backing is the network object a NAD netclass-controller generated stands
// for (nil: another NAD). mismatch checked that the interface was made on
// that network's CNI list.
func (s *foreignSource) backing(nad types.NamespacedName) *attachment.NetworkRef {
	e, _ := s.nads.entry(nad.Namespace, nad.Name)
	if e == nil {
		return nil
	}
	net, ok := e.generated()
	if !ok {
		return nil
	}
	ref, err := nadfile.ParseRef(contract.NADNetworkAnnotation, net)
	if err != nil {
		return nil
	}
	r := network.BackingRef(ref.Namespace, ref.Name)
	return &r
}

// mismatch says why the NAD a network-status names is not the one the
// record was made from ("": it may be). While NADs are not cached (the
// daemon has not seen Multus's CRD served yet), nothing can be checked:
// the attachment waits, and the daemon looks for the CRD at once.
func (s *foreignSource) mismatch(r *attach.Record, nad types.NamespacedName) string {
	e, cached := s.nads.entry(nad.Namespace, nad.Name)
	if !cached {
		s.nads.wanted()
		return "NetworkAttachmentDefinitions are not cached yet (their API was not served when netclass-dra last looked)"
	}
	return nadMismatch(madeOnOf(r), nad, e)
}

// readRecords reads every network's records of the store (an unreadable
// network is reported and skipped).
func readRecords(dir string) ([]*attach.Record, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*attach.Record
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		recs, err := attach.Store{Dir: dir}.List(e.Name())
		errs = append(errs, err)
		out = append(out, recs...)
	}
	return out, errors.Join(errs...)
}

// claimed is the set of sandbox/interface of the claims' attachments.
func claimed(claims []*checkpoint.Claim) map[string]bool {
	out := map[string]bool{}
	for _, c := range claims {
		for _, d := range c.Devices {
			for _, at := range d.Attachments {
				out[at.SandboxID+"/"+at.IfName] = true
			}
		}
	}
	return out
}

// matchForeign turns the records into the agent's foreign attachments:
// those of a running sandbox of the node whose pod is known, named by the
// interface's NetworkAttachmentDefinition in the pod's network-status, or
// Unnamed when it names none, or one the record was not made from
// (mismatch says why; the agent keeps what they hold); never a claim
// attachment's (claimed), whatever its record says. waiting are the
// unnamed ones of pods that ask Multus for networks (multus.Unnamed says
// why) or whose status names another NAD, for their pods' Event.
func matchForeign(recs []*attach.Record, sbs []sandboxes.Sandbox, claimed map[string]bool,
	pod func(namespace, name string, uid types.UID) (*corev1.Pod, bool),
	mismatch func(*attach.Record, types.NamespacedName) string) (out []ruleagent.ForeignAttachment, waiting []waitingAttachment) {
	byID := map[string]sandboxes.Sandbox{}
	for _, sb := range sbs {
		byID[sb.ID] = sb
	}
	for _, r := range recs {
		sb, ok := byID[r.ContainerID]
		if !ok || claimed[r.ContainerID+"/"+r.IfName] {
			continue
		}
		p, ok := pod(sb.Pod.Namespace, sb.Pod.Name, sb.UID)
		if !ok {
			continue
		}
		base, closed := recordedConfig(r.Config)
		status, _ := multus.ParseStatus(p.Annotations[multus.AnnotationNetworkStatus])
		nad, _, ok := multus.NADOf(status, p.Namespace, r.IfName)
		why := ""
		if ok {
			why = mismatch(r, nad)
		} else {
			why = multus.Unnamed(p.Annotations, p.Namespace, r.IfName)
		}
		if !ok || why != "" {
			// Its status not written yet (its update asks for a sync), edited
			// by whoever may update the pod, or not Multus's: the attachment
			// is there all the same, whatever the pod's annotations say.
			out = append(out, ruleagent.ForeignAttachment{Pod: sb.Pod, PodUID: sb.UID, SandboxID: sb.ID, IfName: r.IfName,
				NetNS: r.NetNS, HostIf: r.HostIf, CIDRs: r.Addresses, Base: base, Unnamed: true, NotMultus: !ok && why == ""})
			if why != "" {
				waiting = append(waiting, waitingAttachment{pod: p, key: sb.ID + "/" + r.IfName, ifName: r.IfName, closed: closed, why: why})
			}
			continue
		}
		out = append(out, ruleagent.ForeignAttachment{Pod: sb.Pod, PodUID: sb.UID, SandboxID: sb.ID, IfName: r.IfName,
			NetNS: r.NetNS, NAD: nad, HostIf: r.HostIf, MAC: r.MAC, CIDRs: r.Addresses, Base: base})
	}
	slices.SortFunc(out, func(a, b ruleagent.ForeignAttachment) int {
		return strings.Compare(a.Pod.String()+"/"+a.IfName, b.Pod.String()+"/"+b.IfName)
	})
	return out, waiting
}

// recordedConfig is what a record's configuration says the plugin did at
// ADD: the qos it applied (nil: none) and whether the port started closed
// (portSecurity.startClosed); nothing for a configuration netclass does
// not parse.
func recordedConfig(raw []byte) (base *qos.Spec, startClosed bool) {
	if len(raw) == 0 {
		return nil, false
	}
	c, err := netconf.Parse(raw)
	if err != nil {
		return nil, false
	}
	var common *netconf.Common
	switch c := c.(type) {
	case *netconf.Bridge:
		common = &c.Common
	case *netconf.VLAN:
		common = &c.Common
	case *netconf.VXLAN:
		common = &c.Common
	case *netconf.SRIOV:
		common = &c.Common
	case *netconf.QoSChain: // chained after a foreign plugin (bridge, macvlan...): the QoS, and its dscpPolicy, are its
		common = &c.Common
	default:
		return nil, false
	}
	return common.EffectiveQoS, common.PortSecurity != nil && common.PortSecurity.StartClosed
}

// watchRecords calls changed whenever the store's list of records (a
// file per attachment under a directory per network) differs from the
// last one seen, polling every interval until ctx ends.
func watchRecords(ctx context.Context, dir string, interval time.Duration, changed func()) {
	last := recordNames(dir)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now := recordNames(dir); now != last {
			last = now
			changed()
		}
	}
}

// recordNames lists the store's record files, "<network>/<file>" joined.
func recordNames(dir string) string {
	var names []string
	nets, _ := os.ReadDir(dir)
	for _, n := range nets {
		if !n.IsDir() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(dir, n.Name()))
		for _, f := range files {
			if strings.HasSuffix(f.Name(), ".json") && !strings.HasPrefix(f.Name(), ".") { // not a record being written
				names = append(names, n.Name()+"/"+f.Name())
			}
		}
	}
	return strings.Join(names, "\n")
}

// podInterfaces lists the interface names in a pod's network namespace
// (nri.Plugin.Interfaces).
func podInterfaces(path string) ([]string, error) {
	var names []string
	err := netns.Do(path, func() error {
		links, err := link.List()
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		return err
	})
	return names, err
}
