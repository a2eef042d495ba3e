package network

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netclass-dev/netclass/api/contract"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netspec"
	"github.com/netclass-dev/netclass/controller/condition"
)

// Outcome is the status a Network should have.
type Outcome struct {
	Ready metav1.Condition
	// Held is the SegmentHeld condition (nil: no segment, none is kept).
	Held *metav1.Condition
	// InUse is the InUse condition (Reconcile's, from the claims; unset: left as it is).
	InUse  *metav1.Condition
	Type   netclassv1alpha1.NetworkType
	Config *runtime.RawExtension
}

// Evaluate decides a Network's status from its ClusterNetwork (nil when missing) and every
// object that may hold a segment (netspec.Holders: PodNetworks and the Networks of every
// ClusterNetwork) and the labels of namespaces. Order: NameTooLong, ClusterNetworkNotFound,
// TypeMismatch, NotAllowed, SegmentConflict, InvalidConfig, ClusterNetworkNotReady, Ready. The config is published whenever it renders,
// even while the ClusterNetwork has no ready node; it is informational: every node renders
// the config it runs itself, from the same specs (conf/netspec). SegmentHeld says whether
// the Network holds its segment, whatever its Ready (an invalid Network holds one too).
func Evaluate(net *netclassv1alpha1.Network, cn *netclassv1alpha1.ClusterNetwork, holders []netspec.Holder, ns netspec.NamespaceLabels) Outcome {
	self := netspec.NetworkHolder(net, cn, ns)
	owner := netspec.Owner(self, holders)
	out := evaluate(net, cn, self, owner, ns)
	out.Held = netspec.HeldCondition(self, owner)
	return out
}

func evaluate(net *netclassv1alpha1.Network, cn *netclassv1alpha1.ClusterNetwork, self netspec.Holder, owner *netspec.Holder, ns netspec.NamespaceLabels) Outcome {
	const t = netclassv1alpha1.ConditionReady
	if len(net.Name) > contract.MaxNetworkName || len(net.Namespace) > contract.MaxNetworkName {
		return Outcome{Ready: condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonNameTooLong,
			fmt.Sprintf("%s/%s is longer than a node can offer: a network's namespace and name go in device attributes, which hold at most %d characters each",
				net.Namespace, net.Name, contract.MaxNetworkName))}
	}
	if cn == nil {
		return Outcome{Ready: condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonClusterNetworkNotFound,
			fmt.Sprintf("ClusterNetwork %s does not exist", net.Spec.ClusterNetworkName))}
	}
	if msg := netspec.TypeMismatch(net, cn); msg != "" {
		return Outcome{Ready: condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonTypeMismatch, msg)}
	}
	if msg := netspec.NotPermitted(net, cn, ns); msg != "" {
		return Outcome{Type: cn.Spec.Type, Ready: condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonNotAllowed, msg)}
	}
	if owner != nil {
		return Outcome{Type: cn.Spec.Type, Ready: condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonSegmentConflict,
			netspec.ConflictMessage(self, *owner))}
	}
	cfg, err := netspec.Network(net, cn, nil, nil)
	if err != nil {
		return Outcome{Type: cn.Spec.Type, Ready: condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonInvalidConfig, err.Error())}
	}
	out := Outcome{Type: cn.Spec.Type, Config: &runtime.RawExtension{Raw: cfg}}
	if !condition.IsTrue(cn.Status.Conditions, netclassv1alpha1.ConditionReady) {
		out.Ready = condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonClusterNetworkNotReady,
			fmt.Sprintf("ClusterNetwork %s has no node that can carry it yet", cn.Name))
		return out
	}
	out.Ready = condition.New(t, metav1.ConditionTrue, netclassv1alpha1.ReasonReady,
		fmt.Sprintf("rendered %s config for %s", cn.Spec.Type, self.Segment))
	return out
}
