package nad

import (
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// AnnotationNetworks is Multus's network selection annotation on pods.
const AnnotationNetworks = "k8s.v1.cni.cncf.io/networks"

// MaxNames bounds the NADs read from one pod's annotation, which its users
// write (up to the API's 256 KiB, tens of thousands of names): each is a
// key of the controller's pod index. A pod naming more keeps only the
// first MaxNames from being released while it runs.
const MaxNames = 64

// Names reads a pod's network selection annotation into the NADs it names,
// as "<namespace>/<name>" (the pod's namespace when the element names none).
// Both Multus forms are read: a JSON list of {name, namespace, ...} and the
// comma-separated "[<namespace>/]<name>[@<interface>]". An annotation that
// reads as neither names nothing; names no NAD could have are skipped, and
// at most MaxNames distinct ones are returned.
func Names(podNamespace, annotation string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range allNames(podNamespace, annotation) {
		ns, name, _ := strings.Cut(n, "/")
		if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 || seen[n] {
			continue
		}
		if seen[n] = true; len(out) == MaxNames {
			break
		}
		out = append(out, n)
	}
	return out
}

// allNames is Names without its checks and bound.
func allNames(podNamespace, annotation string) []string {
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
