package nad

import (
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// byNAD indexes pods by the NADs they name ("<namespace>/<name>", any
// namespace: Multus lets a pod name a NAD of another one), pods that ended
// left out.
const byNAD = "nad"

// podInformer is the factory's pod informer, made here: every pod of the
// cluster, each cut down to what a deleting NAD's finalizer needs (cutPod)
// before the cache keeps it, indexed byNAD. The controller is the factory's
// only user of pods; another would see them cut down.
func podInformer(kubeInf informers.SharedInformerFactory) (cache.SharedIndexInformer, error) {
	inf := kubeInf.InformerFor(&corev1.Pod{}, func(kube kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewPodInformer(kube, metav1.NamespaceAll, resync, cache.Indexers{byNAD: podNADs})
	})
	if err := inf.SetTransform(cutPod); err != nil {
		return nil, err
	}
	return inf, nil
}

// cutPod keeps of a pod its identity, phase and the NADs its network
// selection annotation names (Names, at most MaxNames, in Multus's short form
// "<namespace>/<name>,…": the annotation is its users' and may hold a quarter
// of a megabyte, for every pod of the cluster). Anything else (a deletion
// marker) passes unchanged.
func cutPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
		ResourceVersion: p.ResourceVersion}, Status: corev1.PodStatus{Phase: p.Status.Phase}}
	if v, ok := p.Annotations[AnnotationNetworks]; ok {
		out.Annotations = map[string]string{AnnotationNetworks: strings.Join(Names(p.Namespace, v), ",")}
	}
	return out, nil
}

// podNADs is the byNAD index function: the NADs a pod that has not ended
// names, each once.
func podNADs(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return nil, nil
	}
	names := Names(p.Namespace, p.Annotations[AnnotationNetworks])
	slices.Sort(names)
	return slices.Compact(names), nil
}

// deletingNADs are the generated NADs being deleted as the last sync saw
// them: a pod that stops naming one (gone, ended, annotation edited) asks
// for a sync, which releases the NAD once no pod names it.
type deletingNADs struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (d *deletingNADs) set(keys map[string]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keys = keys
}

// released reports whether the pod's change may release a deleting NAD:
// before it, the pod named one; after it (nil: gone) it names fewer.
func (d *deletingNADs) released(before, after any) bool {
	was, _ := podNADs(before)
	var is []string
	if after != nil {
		is, _ = podNADs(after)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range was {
		if d.keys[k] && !slices.Contains(is, k) {
			return true
		}
	}
	return false
}

// inNamespace reports whether a NAD of the namespace is being deleted.
func (d *deletingNADs) inNamespace(ns string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, deleting := range d.keys {
		if deleting && strings.HasPrefix(k, ns+"/") {
			return true
		}
	}
	return false
}
