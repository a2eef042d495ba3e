package netspec

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

// NamespaceLabels answers the labels of a namespace (false: not known, as
// for a namespace not in the cache yet or gone).
type NamespaceLabels func(name string) (map[string]string, bool)

// NotPermitted says why ClusterNetwork cn does not let Network n in, or ""
// when it does: spec.namespaceSelector must select n's namespace (whose
// labels ns answers; unknown labels select nothing) and spec.segmentIds must
// contain n's vlanId or vni. An admin writes both; the tenant writes n.
func NotPermitted(n *ncv1.Network, cn *ncv1.ClusterNetwork, ns NamespaceLabels) string {
	if sel := cn.Spec.NamespaceSelector; sel != nil {
		if msg := namespaceRefused(n.Namespace, cn, sel, ns); msg != "" {
			return msg
		}
	}
	if len(cn.Spec.SegmentIDs) == 0 {
		return ""
	}
	id, what := n.Spec.VNI, "vni"
	if cn.Spec.Type == ncv1.NetworkTypeVLAN {
		id, what = n.Spec.VLANID, "vlanId"
	}
	if id == nil {
		return "" // TypeMismatch or the schema says what is missing
	}
	for _, r := range cn.Spec.SegmentIDs {
		if r.Contains(*id) {
			return ""
		}
	}
	return fmt.Sprintf("%s %d is not in spec.segmentIds of ClusterNetwork %s", what, *id, cn.Name)
}

func namespaceRefused(namespace string, cn *ncv1.ClusterNetwork, sel *metav1.LabelSelector, ns NamespaceLabels) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return fmt.Sprintf("spec.namespaceSelector of ClusterNetwork %s is invalid: %v", cn.Name, err)
	}
	set, known := ns(namespace)
	if known && s.Matches(labels.Set(set)) {
		return ""
	}
	return fmt.Sprintf("namespace %s is not selected by spec.namespaceSelector of ClusterNetwork %s", namespace, cn.Name)
}

// NamespaceGetter is what NamespacesOf reads (a namespace lister).
type NamespaceGetter interface {
	Get(name string) (*corev1.Namespace, error)
}

// NamespacesOf answers namespaces' labels from g.
func NamespacesOf(g NamespaceGetter) NamespaceLabels {
	return func(name string) (map[string]string, bool) {
		n, err := g.Get(name)
		if err != nil {
			return nil, false
		}
		return n.Labels, true
	}
}
