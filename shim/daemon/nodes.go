package daemon

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

// nodeInformer caches every Node with only what rendering reads: the name,
// the node index annotation, the InternalIPs and whether it is being
// deleted, so a large cluster's node objects cost each daemon little.
func nodeInformer(f informers.SharedInformerFactory) (coreinformers.NodeInformer, error) {
	nodes := f.Core().V1().Nodes()
	if err := nodes.Informer().SetTransform(nodeEssentials); err != nil {
		return nil, fmt.Errorf("node informer transform: %w", err)
	}
	return nodes, nil
}

func nodeEssentials(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil // a tombstone
	}
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, DeletionTimestamp: n.DeletionTimestamp,
	}}
	if i, ok := n.Annotations[ncv1.AnnotationNodeIndex]; ok {
		out.Annotations = map[string]string{ncv1.AnnotationNodeIndex: i}
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			out.Status.Addresses = append(out.Status.Addresses, a)
		}
	}
	return out, nil
}

// nodeHandler calls f when a node comes or goes, or when what rendering
// reads of it changes; status heartbeats do not.
func nodeHandler(f func()) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f() },
		DeleteFunc: func(any) { f() },
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			if !ok1 || !ok2 || !equality.Semantic.DeepEqual(essentials(o), essentials(n)) {
				f()
			}
		},
	}
}

func essentials(n *corev1.Node) *corev1.Node {
	e, _ := nodeEssentials(n)
	out := e.(*corev1.Node).DeepCopy()
	out.ResourceVersion = ""
	return out
}

// labelsTrigger calls f when an object comes, goes or changes its labels
// (a namespace's, which ClusterNetworks' namespaceSelectors read), not at
// each resync.
func labelsTrigger(f func()) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f() },
		DeleteFunc: func(any) { f() },
		UpdateFunc: func(old, obj any) {
			o, err1 := meta.Accessor(old)
			n, err2 := meta.Accessor(obj)
			if err1 != nil || err2 != nil || !maps.Equal(o.GetLabels(), n.GetLabels()) {
				f()
			}
		},
	}
}
