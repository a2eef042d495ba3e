// Package deploy_test checks the manifests of conf/deploy: every document decodes strictly
// into its Go type, the RBAC covers what netclass-controller and netclass-dra call, the
// DaemonSet has the host access netclass-dra needs, and DeviceClasses guard their CEL.
package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	ncscheme "github.com/netclass-dev/netclass/api/generated/clientset/versioned/scheme"
)

// decodeAll strictly decodes every document of the YAML files matching glob.
func decodeAll(t testing.TB, glob string) []runtime.Object {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ncscheme.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	dec := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests match %s: %v", glob, err)
	}
	var out []runtime.Object
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, _, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s: document %d: %v", f, i, err)
				continue
			}
			out = append(out, obj)
		}
	}
	return out
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.Bytes()
}

func TestManifestsDecodeStrictly(t *testing.T) {
	if n := len(decodeAll(t, "*.yaml")); n < 15 {
		t.Errorf("only %d objects in conf/deploy", n)
	}
	if n := len(decodeAll(t, "examples/*.yaml")); n < 8 {
		t.Errorf("only %d objects in conf/deploy/examples", n)
	}
}

// need is one permission: group, resource (with subresource), verb, namespace ("" for
// cluster-wide), resource name ("" for any).
type need struct{ group, resource, verb, namespace, name string }

// rulesFor collects the rules bound to a service account, with the namespace they hold in.
type boundRule struct {
	rule      rbacv1.PolicyRule
	namespace string
}

func rulesFor(objs []runtime.Object, sa string) []boundRule {
	clusterRoles, roles := map[string]*rbacv1.ClusterRole{}, map[string]*rbacv1.Role{}
	for _, o := range objs {
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			clusterRoles[r.Name] = r
		case *rbacv1.Role:
			roles[r.Namespace+"/"+r.Name] = r
		}
	}
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == "netclass-system"
		})
	}
	var out []boundRule
	for _, o := range objs {
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			if cr := clusterRoles[b.RoleRef.Name]; cr != nil && bound(b.Subjects) {
				for _, r := range cr.Rules {
					out = append(out, boundRule{r, ""})
				}
			}
		case *rbacv1.RoleBinding:
			if r := roles[b.Namespace+"/"+b.RoleRef.Name]; r != nil && bound(b.Subjects) {
				for _, rule := range r.Rules {
					out = append(out, boundRule{rule, b.Namespace})
				}
			}
		}
	}
	return out
}

func allows(rules []boundRule, n need) bool {
	for _, br := range rules {
		r := br.rule
		if br.namespace != "" && br.namespace != n.namespace {
			continue
		}
		if slices.Contains(r.APIGroups, n.group) && slices.Contains(r.Resources, n.resource) && slices.Contains(r.Verbs, n.verb) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, n.name)) {
			return true
		}
	}
	return false
}

func TestDaemonSetAndDeployment(t *testing.T) {
	objs := decodeAll(t, "*.yaml")
	var ds *appsv1.DaemonSet
	var dep *appsv1.Deployment
	for _, o := range objs {
		switch v := o.(type) {
		case *appsv1.DaemonSet:
			ds = v
		case *appsv1.Deployment:
			dep = v
		}
	}
	if ds == nil || dep == nil {
		t.Fatal("no DaemonSet or no Deployment")
	}
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	if !spec.HostNetwork || c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("netclass-dra must be privileged on the host network")
	}
	mounts := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = true
	}
	for _, p := range []string{"/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry", "/var/run/nri", "/opt/cni/bin", "/var/lib/netclass", "/var/run/netns", "/sys"} {
		if !mounts[p] {
			t.Errorf("netclass-dra lacks the mount %s", p)
		}
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Error("netclass-dra lacks NODE_NAME from spec.nodeName")
	}
	if spec.ServiceAccountName != "netclass-dra" || dep.Spec.Template.Spec.ServiceAccountName != "netclass-controller" {
		t.Error("service accounts do not match the RBAC")
	}
	if args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--leader-elect=true") {
		t.Errorf("controller args %q", args)
	}
}

func TestDeviceClassesAreGuarded(t *testing.T) {
	var n int
	for _, o := range append(decodeAll(t, "*.yaml"), decodeAll(t, "examples/*.yaml")...) {
		dc, ok := o.(*resourceapi.DeviceClass)
		if !ok {
			continue
		}
		n++
		for _, s := range dc.Spec.Selectors {
			e := s.CEL.Expression
			if !strings.HasPrefix(e, `device.driver == "netclass.dev" &&`) || !strings.Contains(e, `.?networkClass.orValue("") == "`+dc.Name+`"`) {
				t.Errorf("DeviceClass %s: selector %q is not guarded by the driver", dc.Name, e)
			}
		}
	}
	if n < 2 {
		t.Errorf("%d DeviceClasses", n)
	}
}
