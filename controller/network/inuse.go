package network

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/usage"
)

// EventDeletionBlocked is emitted while a deleted Network waits for its claims.
const EventDeletionBlocked = "DeletionBlocked"

// InUseCondition computes a Network's InUse condition from the claims using it.
func InUseCondition(users []string, deleting bool) metav1.Condition {
	inUse, msg := usage.InUse(users, deleting)
	if !inUse {
		return condition.New(netclassv1alpha1.ConditionInUse, metav1.ConditionFalse, netclassv1alpha1.ReasonNotInUse, msg)
	}
	return condition.New(netclassv1alpha1.ConditionInUse, metav1.ConditionTrue, netclassv1alpha1.ReasonInUse, msg)
}

// hold returns what uses the Network: its claims and, once it is being
// deleted, its generated NADs; until then it makes sure the Network holds
// the finalizer (the object returned is the one written).
func (c *Controller) hold(ctx context.Context, net *netclassv1alpha1.Network) (*netclassv1alpha1.Network, []string, error) {
	users, err := c.users(net)
	if err != nil {
		return nil, nil, err
	}
	if net.DeletionTimestamp != nil {
		return net, append(users, usage.NADUsers(c.nads, net.Namespace+"/"+net.Name)...), nil
	}
	net, err = c.finalizer.Ensure(ctx, net, (*netclassv1alpha1.Network).DeepCopy)
	return net, users, err
}

// users returns the claims of the Network's namespace that use it: netclass-dra attaches a
// namespaced network only to pods of its namespace (and refuses other claims at Prepare).
func (c *Controller) users(net *netclassv1alpha1.Network) ([]string, error) {
	claims, err := c.claims.ResourceClaims(net.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list resource claims of namespace %s: %w", net.Namespace, err)
	}
	return usage.Users(claims, c.devices())[usage.Network{Namespace: net.Namespace, Name: net.Name}], nil
}

func (c *Controller) devices() usage.Devices { return usage.DevicesOf(c.slices) }

// claimKeys: the Networks a claim uses (the old object of an update comes here too, so a
// claim that stopped using one names it), and the Networks of its namespace being deleted.
func (c *Controller) claimKeys(obj any) []string {
	keys, claim := usage.ClaimKeys(obj, c.devices, true)
	if claim == nil {
		return nil
	}
	nets, _ := c.networks.Networks(claim.Namespace).List(labels.Everything())
	return append(keys, usage.DeletingKeys(nets)...)
}

// sliceKeys: the Networks the slice's netclass.dev devices name.
func (c *Controller) sliceKeys(obj any) []string { return usage.SliceKeys(obj, true) }

// WaitForNADs makes a deleted Network wait for its generated NADs too (see
// usage.NADs); call before Run.
func (c *Controller) WaitForNADs(nads usage.NADs) {
	c.nads = nads
	nads.Notify(usage.Requeue(true, func() []string {
		nets, _ := c.networks.List(labels.Everything())
		return usage.DeletingKeys(nets)
	}, c.queue.Add))
}
