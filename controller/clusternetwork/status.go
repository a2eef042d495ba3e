package clusternetwork

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/condition"
)

// NodeReady reports whether a NodeNetwork says its node can carry the network.
func NodeReady(nn *netclassv1alpha1.NodeNetwork) bool {
	return nn != nil && condition.IsTrue(nn.Status.Conditions, netclassv1alpha1.ConditionReady)
}

// Summary is the aggregate of a ClusterNetwork's NodeNetworks.
type Summary struct {
	Nodes      int32
	ReadyNodes int32
	// ReadyOn holds the selected nodes whose NodeNetwork is Ready.
	ReadyOn map[string]bool
	// Unreported counts selected nodes with no Ready condition yet, or Unknown.
	Unreported int
	// Failures are "node: Reason: message" of NodeNetworks that are Ready=False.
	Failures []string
}

// Summarize aggregates the NodeNetworks of the selected nodes (keyed by node).
func Summarize(nodes []string, byNode map[string]*netclassv1alpha1.NodeNetwork) Summary {
	s := Summary{Nodes: int32(len(nodes)), ReadyOn: map[string]bool{}}
	for _, n := range nodes {
		nn := byNode[n]
		var c *metav1.Condition
		if nn != nil {
			c = condition.Get(nn.Status.Conditions, netclassv1alpha1.ConditionReady)
		}
		switch {
		case c == nil || c.Status == metav1.ConditionUnknown:
			s.Unreported++
		case c.Status == metav1.ConditionTrue:
			s.ReadyNodes++
			s.ReadyOn[n] = true
		default:
			s.Failures = append(s.Failures, fmt.Sprintf("%s: %s: %s", n, c.Reason, c.Message))
		}
	}
	sort.Strings(s.Failures)
	return s
}

// ReadyCondition is the ClusterNetwork's Ready condition: True when at least one selected
// node can carry the network.
func ReadyCondition(s Summary) metav1.Condition {
	const t = netclassv1alpha1.ConditionReady
	switch {
	case s.ReadyNodes > 0:
		return condition.New(t, metav1.ConditionTrue, netclassv1alpha1.ReasonReady,
			fmt.Sprintf("%d of %d selected nodes can carry the network", s.ReadyNodes, s.Nodes))
	case s.Nodes == 0:
		return condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonNoReadyNodes,
			"no node matches spec.nodeSelector")
	case len(s.Failures) == 0:
		return condition.New(t, metav1.ConditionUnknown, netclassv1alpha1.ReasonPending,
			fmt.Sprintf("waiting for netclass-dra to report on %d selected node(s)", s.Unreported))
	}
	return condition.New(t, metav1.ConditionFalse, netclassv1alpha1.ReasonNoReadyNodes,
		"no selected node can carry the network: "+limitList(s.Failures, 5))
}

// InvalidCondition is Ready=False InvalidConfig with the error.
func InvalidCondition(err error) metav1.Condition {
	return condition.New(netclassv1alpha1.ConditionReady, metav1.ConditionFalse, netclassv1alpha1.ReasonInvalidConfig, err.Error())
}

// AgentMissingCondition is the NodeNetwork Ready=Unknown condition the controller writes
// until netclass-dra on the node reports.
func AgentMissingCondition(node string) metav1.Condition {
	return condition.New(netclassv1alpha1.ConditionReady, metav1.ConditionUnknown, netclassv1alpha1.ReasonNodeAgentMissing,
		fmt.Sprintf("netclass-dra has not reported on node %s yet", node))
}

func limitList(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:n], "; ") + fmt.Sprintf("; and %d more", len(items)-n)
}
