// Package qosstatus writes the node's report on each NetworkQoS — its
// entry in status.nodes: how many of the node's attachments hold the
// object's rules, Applied or ApplyFailed (naming the pod and the error),
// and which of its rules the node left out —
// from the rule agent's outcomes. Each node applies its own entry with a
// field manager of its own (server-side apply on the status subresource),
// so nodes never overwrite one another, and writes only what changed.
package qosstatus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/netclass-dev/netclass/api/contract"
	ncapply "github.com/netclass-dev/netclass/api/generated/applyconfigurations/netclass/v1alpha1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/message"
	"github.com/netclass-dev/netclass/shim/render"
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
	// Ignored is "" when no rule of the object was left out of an
	// attachment's (render.IgnoredRule); else the first, and how many.
	Ignored string
}

// Message is the entry's message: its failure, else the rules left out.
func (e Entry) Message() string { return cmp.Or(e.Failure, e.Ignored) }

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
	failed, ignored := map[types.NamespacedName]int{}, map[types.NamespacedName]int{}
	for _, o := range outs {
		left := leftOut(o)
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
			if msg, ok := left[key]; ok {
				ignored[key]++
				if e.Ignored == "" {
					e.Ignored = msg
				}
			}
			entries[key] = e
		}
	}
	for key, e := range entries {
		e.Failure = summary(e.Failure, failed[key], "%d attachments failed; the first: %s")
		e.Ignored = summary(e.Ignored, ignored[key], "rules left out on %d attachments; the first: %s")
		entries[key] = e
	}
	return entries
}

// leftOut names, per NetworkQoS, the first of its rules the attachment of
// o left out: "pod … interface …: spec.egress[i]: why".
func leftOut(o ruleagent.Outcome) map[types.NamespacedName]string {
	out := map[types.NamespacedName]string{}
	for _, ir := range render.IgnoredRules(o.Ignored) {
		key := types.NamespacedName{Namespace: ir.Namespace, Name: ir.Name}
		if _, seen := out[key]; !seen {
			out[key] = fmt.Sprintf("pod %s interface %s: %s", o.Pod, o.IfName, strings.TrimPrefix(ir.Path+": "+ir.Err.Error(), ": "))
		}
	}
	return out
}

// summary is the first message of n (format's count and message when
// more than one), within the API's limit.
func summary(first string, n int, format string) string {
	if n > 1 {
		first = fmt.Sprintf(format, n, first)
	}
	return message.Truncate(first, maxMessage)
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
		if selected && cur != nil && cur.Attachments == want.Attachments && cur.Reason == want.Reason() && cur.Message == want.Message() {
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
		if msg := want.Message(); msg != "" {
			entry.WithMessage(msg)
		}
		status.WithNodes(entry)
	}
	ac := ncapply.NetworkQoS(obj.Name, obj.Namespace).WithStatus(status)
	if _, err := w.Client(obj.Namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: FieldManager(w.Node), Force: true}); err != nil {
		return fmt.Errorf("write node %s's status of NetworkQoS %s/%s: %w", w.Node, obj.Namespace, obj.Name, err)
	}
	w.event(obj, cur, want)
	return nil
}

// event emits a Warning when the entry turns ApplyFailed, or starts
// reporting rules left out (not at each change of their count).
func (w *Writer) event(obj *ncv1.NetworkQoS, cur *ncv1.NetworkQoSNodeStatus, want Entry) {
	switch {
	case w.Events == nil:
	case want.Failure != "" && (cur == nil || cur.Reason != ncv1.ReasonApplyFailed):
		w.Events.Eventf(obj, corev1.EventTypeWarning, ncv1.ReasonApplyFailed, "node %s: %s", w.Node, want.Failure)
	case want.Failure == "" && want.Ignored != "" && (cur == nil || cur.Message == "" || cur.Reason == ncv1.ReasonApplyFailed):
		w.Events.Eventf(obj, corev1.EventTypeWarning, contract.ReasonNetworkQoSIgnored, "node %s: %s", w.Node, want.Ignored)
	}
}
