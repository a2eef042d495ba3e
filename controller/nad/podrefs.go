package nad

import (
	"encoding/json"
	"strings"
)

// AnnotationNetworks is Multus's network selection annotation on pods.
const AnnotationNetworks = "k8s.v1.cni.cncf.io/networks"

// Names reads a pod's network selection annotation into the NADs it names,
// as "<namespace>/<name>" (the pod's namespace when the element names none).
// Both Multus forms are read: a JSON list of {name, namespace, ...} and the
// comma-separated "[<namespace>/]<name>[@<interface>]". An annotation that
// reads as neither names nothing.
func Names(podNamespace, annotation string) []string {
	s := strings.TrimSpace(annotation)
	if s == "" {
		return nil
	}
	var out []string
	if strings.HasPrefix(s, "[") {
		var elems []struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		}
		if err := json.Unmarshal([]byte(s), &elems); err != nil {
			return nil
		}
		for _, e := range elems {
			if e.Name == "" {
				continue
			}
			ns := e.Namespace
			if ns == "" {
				ns = podNamespace
			}
			out = append(out, ns+"/"+e.Name)
		}
		return out
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		item, _, _ = strings.Cut(item, "@")
		ns, name, ok := strings.Cut(item, "/")
		if !ok {
			ns, name = podNamespace, item
		}
		if name != "" && ns != "" {
			out = append(out, ns+"/"+name)
		}
	}
	return out
}
