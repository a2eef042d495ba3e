// Package condition sets metav1.Conditions on an object's status and says whether a
// condition changed state (status or reason), which is what events are emitted for.
package condition

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/conf/message"
)

// Change describes what setting a condition did.
type Change struct {
	// Updated: anything but lastTransitionTime differs; the status must be written.
	Updated bool
	// Transitioned: the condition is new or its status or reason changed; an event is due.
	Transitioned bool
}

// Set puts want (its ObservedGeneration set to generation, its message cut to
// the API's limit: messages quote what users wrote) into conds.
// lastTransitionTime changes only when the status changes, as
// meta.SetStatusCondition does.
func Set(conds *[]metav1.Condition, want metav1.Condition, generation int64) Change {
	want.ObservedGeneration = generation
	want.Message = message.Truncate(want.Message, message.MaxCondition)
	old := meta.FindStatusCondition(*conds, want.Type)
	c := Change{Transitioned: old == nil || old.Status != want.Status || old.Reason != want.Reason}
	c.Updated = meta.SetStatusCondition(conds, want)
	return c
}

// SetOrRemove sets want as Set does, or removes the condition of type t when want is nil.
func SetOrRemove(conds *[]metav1.Condition, t string, want *metav1.Condition, generation int64) Change {
	if want == nil {
		return Change{Updated: meta.RemoveStatusCondition(conds, t)}
	}
	return Set(conds, *want, generation)
}

// Get returns the condition of type t, or nil.
func Get(conds []metav1.Condition, t string) *metav1.Condition {
	return meta.FindStatusCondition(conds, t)
}

// IsTrue reports whether the condition of type t is present and True.
func IsTrue(conds []metav1.Condition, t string) bool {
	return meta.IsStatusConditionTrue(conds, t)
}

// New builds a condition; its generation and transition time are filled in by Set.
func New(t string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: message}
}
