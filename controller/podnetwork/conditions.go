package podnetwork

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/api/contract"
	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/bandwidth"
	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/netspec"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/usage"
)

// ReadyCondition computes the Ready condition of a netclass.dev PodNetwork: disabled wins,
// then a name no node can offer (NameTooLong), then invalid parameters (the message is the validation error, naming every bad field),
// then a segment an older network object holds (SegmentConflict, netspec.Owner over
// holders), then any other False condition a provider set (ConditionsNotReady), else Ready.
func ReadyCondition(pn *multinetworkv1.PodNetwork, holders []netspec.Holder) metav1.Condition {
	return conditions(pn, holders).ready
}

// conditions computes Ready and SegmentHeld, the segment's owner once.
func conditions(pn *multinetworkv1.PodNetwork, holders []netspec.Holder) statusConditions {
	self := netspec.PodNetworkHolder(pn)
	owner := netspec.Owner(self, holders)
	return statusConditions{ready: readyCondition(pn, self, owner), held: netspec.HeldCondition(self, owner)}
}

// readyCondition is ReadyCondition with the segment's owner (nil: none older).
func readyCondition(pn *multinetworkv1.PodNetwork, self netspec.Holder, owner *netspec.Holder) metav1.Condition {
	if !pn.Spec.Enabled {
		return condition.New(multinetworkv1.PodNetworkConditionReady, metav1.ConditionFalse,
			multinetworkv1.PodNetworkReasonAdministrativelyDisabled, "spec.enabled is false")
	}
	if len(pn.Name) > contract.MaxNetworkName {
		return condition.New(multinetworkv1.PodNetworkConditionReady, metav1.ConditionFalse, netclassv1alpha1.ReasonNameTooLong,
			fmt.Sprintf("the name has %d characters: a node offers a network by its name in device attributes, which hold at most %d", len(pn.Name), contract.MaxNetworkName))
	}
	if err := ValidateParameters(pn); err != nil {
		return condition.New(multinetworkv1.PodNetworkConditionReady, metav1.ConditionFalse,
			multinetworkv1.PodNetworkReasonInvalidParameters, err.Error())
	}
	if owner != nil {
		return condition.New(multinetworkv1.PodNetworkConditionReady, metav1.ConditionFalse,
			netclassv1alpha1.ReasonSegmentConflict, netspec.ConflictMessage(self, *owner))
	}
	if bad := falseConditions(pn.Status.Conditions); len(bad) > 0 {
		return condition.New(multinetworkv1.PodNetworkConditionReady, metav1.ConditionFalse,
			multinetworkv1.PodNetworkReasonConditionsNotReady, "conditions not ready: "+strings.Join(bad, ", "))
	}
	return condition.New(multinetworkv1.PodNetworkConditionReady, metav1.ConditionTrue,
		multinetworkv1.PodNetworkReasonReady, "parameters are a valid netclass plugin configuration")
}

// ValidateParameters renders spec.parameters into a plugin configuration with
// conf/netconf, with what each node fills in itself (master, automatic
// remotes, its block of host-local ranges) stood in for (conf/netspec).
func ValidateParameters(pn *multinetworkv1.PodNetwork) error {
	raw := pn.Spec.Parameters.Raw
	if len(raw) == 0 {
		raw = []byte("null")
	}
	raw, err := netspec.PodNetworkParameters(raw, nil)
	if err != nil {
		return fmt.Errorf("spec.parameters: %w", err)
	}
	var errs []error
	if _, err := netconf.RenderParameters(pn.Name, contract.CNIVersion, raw); err != nil {
		errs = append(errs, fmt.Errorf("spec.parameters: %w", err))
	}
	if _, err := bandwidth.ForPodNetwork(pn.Annotations); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// falseConditions lists the types of False conditions other than netclass's own: Ready,
// InUse and SegmentHeld (whose False is Ready's SegmentConflict).
func falseConditions(conds []metav1.Condition) []string {
	var out []string
	for _, c := range conds {
		switch c.Type {
		case multinetworkv1.PodNetworkConditionReady, multinetworkv1.PodNetworkConditionInUse, netclassv1alpha1.ConditionSegmentHeld:
			continue
		}
		if c.Status == metav1.ConditionFalse {
			out = append(out, c.Type)
		}
	}
	return out
}

// InUseCondition computes the InUse condition from the claims using the network; when the
// PodNetwork is being deleted the message says that deletion waits for them.
func InUseCondition(users []string, deleting bool) metav1.Condition {
	inUse, msg := usage.InUse(users, deleting)
	if !inUse {
		return condition.New(multinetworkv1.PodNetworkConditionInUse, metav1.ConditionFalse, multinetworkv1.PodNetworkReasonNotInUse, msg)
	}
	return condition.New(multinetworkv1.PodNetworkConditionInUse, metav1.ConditionTrue, multinetworkv1.PodNetworkReasonInUse, msg)
}
