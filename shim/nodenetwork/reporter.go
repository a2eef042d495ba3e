package nodenetwork

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	ncapply "github.com/netclass-dev/netclass/api/generated/applyconfigurations/netclass/v1alpha1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/message"
)

// StatusAPI applies a NodeNetwork's status.
type StatusAPI interface {
	ApplyStatus(ctx context.Context, nn *ncapply.NodeNetworkApplyConfiguration, opts metav1.ApplyOptions) (*ncv1.NodeNetwork, error)
}

// Reporter keeps this node's NodeNetwork statuses current.
type Reporter struct {
	API  StatusAPI
	Host Host
	Now  func() time.Time
	// Devices names the node devices kept for a ClusterNetwork's networks
	// (nil: none are reported).
	Devices func(clusterNetwork string) []string
}

// Report evaluates one NodeNetwork and applies its status when it changed.
func (r *Reporter) Report(ctx context.Context, nn *ncv1.NodeNetwork, node Node) error {
	v := Evaluate(nn, r.Host, node)
	v.NodeIndex = node.Index
	if r.Devices != nil {
		v.Devices = r.Devices(nn.Spec.ClusterNetworkName)
	}
	if !changed(nn, v) {
		return nil
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	_, err := r.API.ApplyStatus(ctx, Apply(nn, v, now), metav1.ApplyOptions{FieldManager: contract.FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("apply status of NodeNetwork %s: %w", nn.Name, err)
	}
	klog.FromContext(ctx).V(1).Info("NodeNetwork status", "nodeNetwork", nn.Name, "ready", v.Ready, "reason", v.Reason, "message", v.Message)
	return nil
}

// Apply builds the status apply configuration; the transition time stays
// when the condition's status does not change.
func Apply(nn *ncv1.NodeNetwork, v Verdict, now time.Time) *ncapply.NodeNetworkApplyConfiguration {
	status := metav1.ConditionFalse
	if v.Ready {
		status = metav1.ConditionTrue
	}
	transition := metav1.NewTime(now)
	if c := meta.FindStatusCondition(nn.Status.Conditions, ncv1.ConditionReady); c != nil && c.Status == status {
		transition = c.LastTransitionTime
	}
	st := ncapply.NodeNetworkStatus().WithObservedGeneration(nn.Generation).
		WithConditions(metav1ac.Condition().WithType(ncv1.ConditionReady).WithStatus(status).
			WithReason(v.Reason).WithMessage(message.Truncate(v.Message, message.MaxCondition)).WithLastTransitionTime(transition).
			WithObservedGeneration(nn.Generation))
	if v.Master != "" {
		st.WithMaster(ncv1.InterfaceName(v.Master))
	}
	if v.LocalAddress != "" {
		st.WithLocalAddress(ncv1.IPAddress(v.LocalAddress))
	}
	if v.MTU > 0 {
		st.WithMTU(int32(v.MTU))
	}
	if v.NodeIndex >= 0 {
		st.WithNodeIndex(int32(v.NodeIndex))
	}
	st.WithDevices(v.Devices...)
	return ncapply.NodeNetwork(nn.Name).WithStatus(st)
}

func changed(nn *ncv1.NodeNetwork, v Verdict) bool {
	c := meta.FindStatusCondition(nn.Status.Conditions, ncv1.ConditionReady)
	want := metav1.ConditionFalse
	if v.Ready {
		want = metav1.ConditionTrue
	}
	mtu, index := 0, -1
	if nn.Status.MTU != nil {
		mtu = int(*nn.Status.MTU)
	}
	if nn.Status.NodeIndex != nil {
		index = int(*nn.Status.NodeIndex)
	}
	return c == nil || c.Status != want || c.Reason != v.Reason || c.Message != v.Message ||
		c.ObservedGeneration != nn.Generation || nn.Status.ObservedGeneration != nn.Generation ||
		string(nn.Status.Master) != v.Master || string(nn.Status.LocalAddress) != v.LocalAddress || mtu != v.MTU || index != v.NodeIndex ||
		!slices.Equal(nn.Status.Devices, v.Devices)
}
