package netspec

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

// HeldMessage is the SegmentHeld condition's message while an object holds seg.
func HeldMessage(seg Segment) string { return seg.String() + " belongs to this network" }

// heldIn reports whether conds say, in a True SegmentHeld condition naming
// seg, that netclass-controller found the object holding seg. It only breaks
// the tie of two objects created in the same second (Holder.before): a
// status another writer forged can do no more than that.
func heldIn(conds []metav1.Condition, seg Segment) bool {
	if seg.Kind == "" {
		return false
	}
	c := meta.FindStatusCondition(conds, ncv1.ConditionSegmentHeld)
	return c != nil && c.Status == metav1.ConditionTrue && c.Message == HeldMessage(seg)
}

// HeldCondition is h's SegmentHeld condition when owner (Owner's answer) holds
// its segment, or nil when h has no segment (the condition is then removed).
func HeldCondition(h Holder, owner *Holder) *metav1.Condition {
	switch {
	case h.Segment.Kind == "":
		return nil
	case owner != nil:
		return &metav1.Condition{Type: ncv1.ConditionSegmentHeld, Status: metav1.ConditionFalse,
			Reason: ncv1.ReasonSegmentConflict, Message: ConflictMessage(h, *owner)}
	}
	return &metav1.Condition{Type: ncv1.ConditionSegmentHeld, Status: metav1.ConditionTrue,
		Reason: ncv1.ReasonSegmentHeld, Message: HeldMessage(h.Segment)}
}
