package clusternetwork

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/bandwidth"
	"github.com/netclass-dev/netclass/conf/field"
)

// maxNameLen is the longest object name (a DNS subdomain).
const maxNameLen = 253

// NodeNetworkName is the name of the NodeNetwork of ClusterNetwork cn on node:
// "<cn>.<node>", or, when that is longer than 253 characters, the node name cut short and
// followed by a hash of the whole node name.
func NodeNetworkName(cn, node string) string {
	name := cn + "." + node
	if len(name) <= maxNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	hash := hex.EncodeToString(sum[:])[:10]
	keep := maxNameLen - len(cn) - 1 - 1 - len(hash)
	return cn + "." + strings.TrimRight(node[:keep], ".-") + "-" + hash
}

// NodeLabel is the node label key that says a node can carry ClusterNetwork cn.
func NodeLabel(cn string) string { return netclassv1alpha1.NodeLabelPrefix + cn }

// NodeSelector turns spec.nodeSelector into a selector; unset selects every node.
func NodeSelector(cn *netclassv1alpha1.ClusterNetwork) (labels.Selector, error) {
	if cn.Spec.NodeSelector == nil {
		return labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(cn.Spec.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.nodeSelector: %w", err)
	}
	return sel, nil
}

// ValidateBandwidth checks spec.bandwidth (conf/bandwidth: every problem,
// each with its field path); nil when valid or unset.
func ValidateBandwidth(cn *netclassv1alpha1.ClusterNetwork) error {
	if _, err := bandwidth.Resolve(cn.Spec.Bandwidth, field.Path("spec.bandwidth")); err != nil {
		return fmt.Errorf("bandwidth of ClusterNetwork %s: %w", cn.Name, err)
	}
	return nil
}

// SelectedNodes returns the sorted names of the nodes sel matches, leaving out nodes being
// deleted.
func SelectedNodes(nodes []*corev1.Node, sel labels.Selector) []string {
	var out []string
	for _, n := range nodes {
		if n.DeletionTimestamp == nil && sel.Matches(labels.Set(n.Labels)) {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out
}

// NodeOptions computes the options of the NodeNetwork on each selected node: the
// ClusterNetwork's defaultOptions (with the member of its type always present, so a node
// knows the type even when the admin left every option to the nodes), and for a VXLAN
// network that names neither a multicast group nor remotes, remotes filled in with the
// underlay addresses the other nodes' Ready NodeNetworks report (status.localAddress), so
// unicast flooding reaches every node that can carry the network, and a node that leaves
// (or stops being Ready) leaves every other node's flood list.
func NodeOptions(cn *netclassv1alpha1.ClusterNetwork, nodes []string, existing map[string]*netclassv1alpha1.NodeNetwork) map[string]netclassv1alpha1.Options {
	base := netclassv1alpha1.Options{}
	if cn.Spec.DefaultOptions != nil {
		base = *cn.Spec.DefaultOptions.DeepCopy()
	}
	switch {
	case cn.Spec.Type == netclassv1alpha1.NetworkTypeVXLAN && base.VXLAN == nil:
		base.VXLAN = &netclassv1alpha1.VXLANOptions{}
	case cn.Spec.Type == netclassv1alpha1.NetworkTypeVLAN && base.VLAN == nil:
		base.VLAN = &netclassv1alpha1.VLANOptions{}
	}
	out := make(map[string]netclassv1alpha1.Options, len(nodes))
	autoRemotes := cn.Spec.Type == netclassv1alpha1.NetworkTypeVXLAN &&
		(base.VXLAN == nil || (base.VXLAN.Group == "" && len(base.VXLAN.Remotes) == 0))
	for _, node := range nodes {
		opts := *base.DeepCopy()
		if autoRemotes {
			if remotes := otherAddresses(node, nodes, existing); len(remotes) > 0 {
				opts.VXLAN.Remotes = remotes
			}
		}
		out[node] = opts
	}
	return out
}

// maxRemotes is the schema's limit on remotes.
const maxRemotes = 512

// otherAddresses lists, sorted and without duplicates, the underlay addresses reported by
// the Ready NodeNetworks of the selected nodes other than node.
func otherAddresses(node string, nodes []string, existing map[string]*netclassv1alpha1.NodeNetwork) []netclassv1alpha1.IPAddress {
	seen := map[netclassv1alpha1.IPAddress]bool{}
	for _, other := range nodes {
		nn := existing[other]
		if other == node || nn == nil || nn.Status.LocalAddress == "" ||
			!meta.IsStatusConditionTrue(nn.Status.Conditions, netclassv1alpha1.ConditionReady) {
			continue
		}
		seen[nn.Status.LocalAddress] = true
	}
	out := make([]netclassv1alpha1.IPAddress, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	if len(out) > maxRemotes {
		out = out[:maxRemotes]
	}
	return out
}

// NewNodeNetwork builds the NodeNetwork of cn on node, owned (as controller) by cn so that
// the garbage collector removes it with the ClusterNetwork.
func NewNodeNetwork(cn *netclassv1alpha1.ClusterNetwork, node string, opts netclassv1alpha1.Options) *netclassv1alpha1.NodeNetwork {
	return &netclassv1alpha1.NodeNetwork{
		ObjectMeta: metav1.ObjectMeta{
			Name:            NodeNetworkName(cn.Name, node),
			Labels:          map[string]string{netclassv1alpha1.LabelClusterNetwork: cn.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cn, netclassv1alpha1.SchemeGroupVersion.WithKind("ClusterNetwork"))},
		},
		Spec: netclassv1alpha1.NodeNetworkSpec{
			ClusterNetworkName: cn.Name,
			NodeName:           node,
			Description:        cn.Spec.Description,
			Options:            opts,
		},
	}
}

// Plan is what a reconcile must do to the NodeNetworks of one ClusterNetwork.
type Plan struct {
	Create []*netclassv1alpha1.NodeNetwork
	// Update holds existing NodeNetworks with the spec they must get.
	Update []*netclassv1alpha1.NodeNetwork
	Delete []*netclassv1alpha1.NodeNetwork
}

// PlanNodeNetworks compares the NodeNetworks that exist for cn (any name, keyed by node:
// several per node are possible after a conflict, so it takes the full list) with one per
// selected node carrying opts.
func PlanNodeNetworks(cn *netclassv1alpha1.ClusterNetwork, opts map[string]netclassv1alpha1.Options, existing []*netclassv1alpha1.NodeNetwork) Plan {
	var p Plan
	kept := map[string]bool{}
	sorted := append([]*netclassv1alpha1.NodeNetwork(nil), existing...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, nn := range sorted {
		o, want := opts[nn.Spec.NodeName]
		if !want || kept[nn.Spec.NodeName] || !metav1.IsControlledBy(nn, cn) {
			p.Delete = append(p.Delete, nn)
			continue
		}
		kept[nn.Spec.NodeName] = true
		if !equalOptions(nn.Spec.Options, o) || nn.Spec.Description != cn.Spec.Description {
			upd := nn.DeepCopy()
			upd.Spec.Options = o
			upd.Spec.Description = cn.Spec.Description
			p.Update = append(p.Update, upd)
		}
	}
	nodes := make([]string, 0, len(opts))
	for n := range opts {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		if !kept[n] {
			p.Create = append(p.Create, NewNodeNetwork(cn, n, opts[n]))
		}
	}
	return p
}

// equalOptions compares semantically: nil and empty lists are equal.
func equalOptions(a, b netclassv1alpha1.Options) bool {
	return equality.Semantic.DeepEqual(a, b)
}
