package network

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/condition"
)

// Outcome is the status a Network should have.
type Outcome struct {
	Ready  metav1.Condition
	Type   netclassv1alpha1.NetworkType
	Config *runtime.RawExtension
}

// Evaluate decides a Network's status from its ClusterNetwork (nil when missing) and the
// other Networks under the same ClusterNetwork. Order: ClusterNetworkNotFound,
// TypeMismatch, SegmentConflict, InvalidConfig, ClusterNetworkNotReady, Ready. The config
// is published whenever it renders, even while the ClusterNetwork has no ready node.
func Evaluate(net *netclassv1alpha1.Network, cn *netclassv1alpha1.ClusterNetwork, others []*netclassv1alpha1.Network) Outcome {
	const t = netclassv1alpha1.ConditionReady
	if cn == nil {
		return Outcome{Ready: condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonClusterNetworkNotFound,
			fmt.Sprintf("ClusterNetwork %s does not exist", net.Spec.ClusterNetworkName))}
	}
	if msg := TypeMismatch(net, cn); msg != "" {
		return Outcome{Ready: condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonTypeMismatch, msg)}
	}
	if winner := SegmentOwner(net, others); winner != nil {
		return Outcome{Type: cn.Spec.Type, Ready: condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonSegmentConflict,
			fmt.Sprintf("%s is already used by Network %s/%s under ClusterNetwork %s", segment(net), winner.Namespace, winner.Name, cn.Name))}
	}
	cfg, err := Render(net, cn)
	if err != nil {
		return Outcome{Type: cn.Spec.Type, Ready: condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonInvalidConfig, err.Error())}
	}
	raw, err := ToRaw(cfg)
	if err != nil {
		return Outcome{Type: cn.Spec.Type, Ready: condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonInvalidConfig, err.Error())}
	}
	out := Outcome{Type: cn.Spec.Type, Config: raw}
	if !condition.IsTrue(cn.Status.Conditions, netclassv1alpha1.ConditionReady) {
		out.Ready = condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonClusterNetworkNotReady,
			fmt.Sprintf("ClusterNetwork %s has no node that can carry it yet", cn.Name))
		return out
	}
	out.Ready = condition.New(t, metav1.ConditionTrue, netclassv1alpha1.ReasonReady,
		fmt.Sprintf("rendered %s config for %s", cn.Spec.Type, segment(net)))
	return out
}

// segment names a Network's VLAN ID or VNI.
func segment(net *netclassv1alpha1.Network) string {
	if net.Spec.VLANID != nil {
		return fmt.Sprintf("VLAN ID %d", *net.Spec.VLANID)
	}
	if net.Spec.VNI != nil {
		return fmt.Sprintf("VNI %d", *net.Spec.VNI)
	}
	return "no segment"
}

// SegmentOwner returns the Network among others (same ClusterNetwork) that holds net's
// segment before net: the oldest, ties broken by namespace/name. nil when net holds it.
func SegmentOwner(net *netclassv1alpha1.Network, others []*netclassv1alpha1.Network) *netclassv1alpha1.Network {
	var owner *netclassv1alpha1.Network
	for _, o := range others {
		if o.UID == net.UID && o.Namespace == net.Namespace && o.Name == net.Name {
			continue
		}
		if o.DeletionTimestamp != nil || o.Spec.ClusterNetworkName != net.Spec.ClusterNetworkName || segment(o) != segment(net) {
			continue
		}
		if before(o, net) && (owner == nil || before(o, owner)) {
			owner = o
		}
	}
	return owner
}

func before(a, b *netclassv1alpha1.Network) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}
