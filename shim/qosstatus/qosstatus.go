// Package qosstatus writes the node's report on each NetworkQoS — its
// entry in status.nodes: how many of the node's attachments hold the
// object's rules, Applied or ApplyFailed (naming the pod and the error) —
// from the rule agent's outcomes. Each node applies its own entry with a
// field manager of its own (server-side apply on the status subresource),
// so nodes never overwrite one another, and writes only what changed.
package qosstatus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	ncapply "github.com/netclass-dev/netclass/api/generated/applyconfigurations/netclass/v1alpha1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/ruleagent"
)

// FieldManager is the field manager of a node's entries.
func FieldManager(node string) string { return "netclass-dra/" + node }

// maxMessage is the API's limit of an entry's message.
const maxMessage = 1024

// Entry is the node's report on one NetworkQoS.
type Entry struct {
	Attachments int32
	// Failure is "" when every selected attachment holds the rules.
	Failure string
}

// Reason is the entry's reason.
func (e Entry) Reason() string {
	if e.Failure != "" {
		return ncv1.ReasonApplyFailed
	}
	return ncv1.ReasonApplied
}

// Summarise turns a sync's outcomes into the node's entry per NetworkQoS:
// an attachment counts for every object that selects it once it holds the
// rules; a failed one makes the entry ApplyFailed, its message naming the
// first failed pod and how many failed.
func Summarise(outs []ruleagent.Outcome) map[types.NamespacedName]Entry {
	entries := map[types.NamespacedName]Entry{}
	failed := map[types.NamespacedName]int{}
	for _, o := range outs {
		for _, name := range o.Selected {
			key := types.NamespacedName{Namespace: o.Pod.Namespace, Name: name}
			e := entries[key]
			if o.QoSErr == nil { // a NetworkPolicy's failure is not the NetworkQoS's
				e.Attachments++
			} else {
				failed[key]++
				if e.Failure == "" {
					e.Failure = o.QoSErr.Error()
				}
			}
			entries[key] = e
		}
	}
	for key, n := range failed {
		e := entries[key]
		if n > 1 {
			e.Failure = fmt.Sprintf("%d attachments failed; the first: %s", n, e.Failure)
		}
		if len(e.Failure) > maxMessage {
			e.Failure = e.Failure[:maxMessage-3] + "..."
		}
		entries[key] = e
	}
	return entries
}

// Client applies a NetworkQoS's status.
type Client interface {
	ApplyStatus(ctx context.Context, obj *ncapply.NetworkQoSApplyConfiguration, opts metav1.ApplyOptions) (*ncv1.NetworkQoS, error)
}

// Writer writes the node's entries.
type Writer struct {
	Node string
	// Objects lists every NetworkQoS (an informer cache).
	Objects func() ([]*ncv1.NetworkQoS, error)
	// Client returns the client of a namespace's NetworkQoS objects.
	Client func(namespace string) Client
	Events record.EventRecorder
	Now    func() time.Time
}

// Write brings the node's entries to the outcomes: an entry per selecting
// object, and no entry on objects that select nothing on the node any more.
func (w *Writer) Write(ctx context.Context, outs []ruleagent.Outcome) error {
	objs, err := w.Objects()
	if err != nil {
		return fmt.Errorf("list NetworkQoS: %w", err)
	}
	entries := Summarise(outs)
	var errs []error
	for _, obj := range objs {
		want, selected := entries[types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}]
		cur := w.current(obj)
		if !selected && cur == nil {
			continue
		}
		if selected && cur != nil && cur.Attachments == want.Attachments && cur.Reason == want.Reason() && cur.Message == want.Failure {
			continue
		}
		if err := w.apply(ctx, obj, cur, want, selected); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (w *Writer) current(obj *ncv1.NetworkQoS) *ncv1.NetworkQoSNodeStatus {
	i := slices.IndexFunc(obj.Status.Nodes, func(n ncv1.NetworkQoSNodeStatus) bool { return n.Node == w.Node })
	if i < 0 {
		return nil
	}
	return &obj.Status.Nodes[i]
}

// apply writes the node's entry (or, not selected, none: server-side
// apply removes what the node's field manager no longer applies).
func (w *Writer) apply(ctx context.Context, obj *ncv1.NetworkQoS, cur *ncv1.NetworkQoSNodeStatus, want Entry, selected bool) error {
	status := ncapply.NetworkQoSStatus()
	if selected {
		since := metav1.NewTime(w.Now())
		if cur != nil && cur.Reason == want.Reason() {
			since = cur.LastTransitionTime
		}
		entry := ncapply.NetworkQoSNodeStatus().WithNode(w.Node).WithAttachments(want.Attachments).
			WithReason(want.Reason()).WithLastTransitionTime(since)
		if want.Failure != "" {
			entry.WithMessage(want.Failure)
		}
		status.WithNodes(entry)
	}
	ac := ncapply.NetworkQoS(obj.Name, obj.Namespace).WithStatus(status)
	if _, err := w.Client(obj.Namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: FieldManager(w.Node), Force: true}); err != nil {
		return fmt.Errorf("write node %s's status of NetworkQoS %s/%s: %w", w.Node, obj.Namespace, obj.Name, err)
	}
	if want.Failure != "" && (cur == nil || cur.Reason != ncv1.ReasonApplyFailed) && w.Events != nil {
		w.Events.Eventf(obj, corev1.EventTypeWarning, ncv1.ReasonApplyFailed, "node %s: %s", w.Node, want.Failure)
	}
	return nil
}
