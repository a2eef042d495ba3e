package nodeindex_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/nodeindex"
)

func node(name string, created int64, index string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(created, 0))}}
	if index != "" {
		n.Annotations = map[string]string{ncv1.AnnotationNodeIndex: index}
	}
	return n
}

func TestPlan(t *testing.T) {
	deleting := node("d", 1, "")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(50, 0)}
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		want  string
		dups  string
	}{
		{name: "fresh cluster: by age, then name", nodes: []*corev1.Node{node("b", 2, ""), node("c", 1, ""), node("a", 2, "")},
			want: "[{c 0} {a 1} {b 2}]", dups: "[]"},
		{name: "lowest free index: a departed node's is reused", nodes: []*corev1.Node{node("a", 1, "0"), node("c", 3, "2"), node("new", 9, "")},
			want: "[{new 1}]", dups: "[]"},
		{name: "nothing to do", nodes: []*corev1.Node{node("a", 1, "1"), node("b", 2, "0")}, want: "[]", dups: "[]"},
		{name: "malformed indexes are taken as missing", nodes: []*corev1.Node{node("a", 1, "-1"), node("b", 2, "01"), node("c", 3, "x")},
			want: "[{a 0} {b 1} {c 2}]", dups: "[]"},
		{name: "a duplicate is reported, the older node keeps it", nodes: []*corev1.Node{node("young", 5, "0"), node("old", 1, "0")},
			want: "[]", dups: "[young]"},
		{name: "a node being deleted gets none", nodes: []*corev1.Node{deleting}, want: "[]", dups: "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assign, dups := nodeindex.Plan(tc.nodes)
			if got := fmt.Sprint(assign); got != tc.want && !(len(assign) == 0 && tc.want == "[]") {
				t.Errorf("assign %s, want %s", got, tc.want)
			}
			if got := fmt.Sprint(dups); got != tc.dups && !(len(dups) == 0 && tc.dups == "[]") {
				t.Errorf("duplicates %s, want %s", got, tc.dups)
			}
		})
	}
}
