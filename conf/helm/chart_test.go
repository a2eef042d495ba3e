// Package helm_test holds the Helm chart of conf/helm/netclass to conf/deploy: the chart
// rendered with its default values (testdata/default.yaml, which `make test-helm` proves is
// what `helm template` renders) is exactly conf/deploy's objects, its crds/ are conf/crd's,
// and every value of testdata/custom-values.yaml takes effect in testdata/custom.yaml.
package helm_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	ncscheme "github.com/netclass-dev/netclass/api/generated/clientset/versioned/scheme"
)

// objects reads every document of the files: each decodes strictly into its Go type, and is
// returned as unstructured content keyed by kind/namespace/name.
func objects(t *testing.T, files ...string) map[string]map[string]any {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ncscheme.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	strict := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	out := map[string]map[string]any{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var content map[string]any
			if err := yaml.Unmarshal(doc, &content); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(content) == 0 {
				continue // comments only
			}
			if _, _, err := strict.Decode(doc, nil, nil); err != nil {
				t.Errorf("%s: %v", f, err)
			}
			u := unstructured.Unstructured{Object: content}
			key := u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
			if _, dup := out[key]; dup {
				t.Errorf("%s: %s twice", f, key)
			}
			out[key] = content
		}
	}
	return out
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("nothing matches %s: %v", pattern, err)
	}
	return files
}

func keys(m map[string]map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The chart with its default values installs exactly conf/deploy's objects; the one object
// it leaves to Helm is the namespace (helm install --create-namespace), which conf/deploy
// creates itself.
func TestDefaultRenderIsConfDeploy(t *testing.T) {
	chart := objects(t, "testdata/default.yaml")
	deploy := objects(t, glob(t, "../deploy/*.yaml")...)
	if _, ok := deploy["Namespace//netclass-system"]; !ok {
		t.Fatal("conf/deploy creates no namespace netclass-system")
	}
	delete(deploy, "Namespace//netclass-system")
	if !slices.Equal(keys(chart), keys(deploy)) {
		t.Fatalf("the chart renders %v\nconf/deploy holds %v", keys(chart), keys(deploy))
	}
	for k, want := range deploy {
		if !reflect.DeepEqual(chart[k], want) {
			a, _ := yaml.Marshal(chart[k])
			b, _ := yaml.Marshal(want)
			t.Errorf("%s differs:\nchart:\n%s\nconf/deploy:\n%s", k, a, b)
		}
	}
}

// crds/ of the chart is conf/crd, file for file, and crds/thirdparty is
// conf/crd/thirdparty (the CRDs of other projects' APIs netclass reads).
func TestChartCRDsAreConfCRD(t *testing.T) {
	for _, dir := range []string{"", "thirdparty"} {
		want := glob(t, filepath.Join("../crd", dir, "*.yaml"))
		got := glob(t, filepath.Join("netclass/crds", dir, "*.yaml"))
		base := func(fs []string) []string {
			out := make([]string, len(fs))
			for i, f := range fs {
				out[i] = filepath.Base(f)
			}
			return out
		}
		if !slices.Equal(base(got), base(want)) {
			t.Fatalf("chart crds/%s %v, conf/crd/%s %v", dir, base(got), dir, base(want))
		}
		for _, f := range want {
			a, _ := os.ReadFile(f)
			b, _ := os.ReadFile(filepath.Join("netclass/crds", dir, filepath.Base(f)))
			if !bytes.Equal(a, b) {
				t.Errorf("netclass/crds/%s differs from conf/crd (make helm-golden)", filepath.Join(dir, filepath.Base(f)))
			}
		}
	}
}

// conf/crd/thirdparty's MultiNetworkPolicy CRD is the one the module whose
// Go types netclass-dra reads ships (its scheme.yml), byte for byte.
func TestMultiNetworkPolicyCRDIsTheModules(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/k8snetworkplumbingwg/multi-networkpolicy").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "scheme.yml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../crd/thirdparty/k8s.cni.cncf.io_multi-networkpolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("conf/crd/thirdparty/k8s.cni.cncf.io_multi-networkpolicies.yaml differs from the module's scheme.yml")
	}
}

// conf/crd/thirdparty's ClusterNetworkPolicy CRD is the standard channel's
// of the module whose Go types netclass-dra reads, byte for byte.
func TestClusterNetworkPolicyCRDIsTheModules(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/network-policy-api").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	const name = "policy.networking.k8s.io_clusternetworkpolicies.yaml"
	want, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard", name))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../crd/thirdparty/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("conf/crd/thirdparty/" + name + " differs from the module's config/crd/standard")
	}
}

// get is the value at a path of nested maps and lists ("containers.0.args").
func get(t *testing.T, obj map[string]any, path string) any {
	t.Helper()
	var cur any = obj
	for _, p := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			i := 0
			for _, d := range p {
				i = i*10 + int(d-'0')
			}
			if i >= len(c) {
				t.Fatalf("%s: index %d of %d", path, i, len(c))
			}
			cur = c[i]
		default:
			t.Fatalf("%s: %T at %s", path, cur, p)
		}
	}
	return cur
}

func asYAML(v any) string {
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}

// Every value of custom-values.yaml takes effect.
func TestCustomValues(t *testing.T) {
	objs := objects(t, "testdata/custom.yaml")
	ns, ok := objs["Namespace//nc-ops"]
	if !ok {
		t.Fatalf("createNamespace: no Namespace nc-ops in %v", keys(objs))
	}
	if get(t, ns, "metadata.labels").(map[string]any)["app.kubernetes.io/part-of"] != "netclass" {
		t.Error("the namespace lacks conf/deploy's label")
	}
	for k := range objs {
		if parts := strings.Split(k, "/"); parts[1] != "" && parts[1] != "nc-ops" {
			t.Errorf("%s is not in the namespace value", k)
		}
	}
	for _, vap := range []string{"netclass-controller-node-labels", "netclass-dra-own-node", "netclass-in-use-finalizer"} {
		if c := asYAML(objs["ValidatingAdmissionPolicy//"+vap]); !strings.Contains(c, "system:serviceaccount:nc-ops:") || strings.Contains(c, "netclass-system") {
			t.Errorf("%s does not name the service account of nc-ops", vap)
		}
	}
	if _, ok := objs["DeviceClass//netclass-networks"]; ok {
		t.Error("deviceClasses: netclass-networks shipped")
	}
	if _, ok := objs["DeviceClass//netclass"]; !ok {
		t.Error("deviceClasses: netclass not shipped")
	}
	dep, ds := objs["Deployment/nc-ops/netclass-controller"], objs["DaemonSet/nc-ops/netclass-dra"]
	for what, want := range map[string]string{
		"spec.replicas":                                               "1",
		"spec.template.spec.hostNetwork":                              "true",
		"spec.template.spec.dnsPolicy":                                "ClusterFirstWithHostNet",
		"spec.template.spec.nodeSelector":                             `node-role.kubernetes.io/control-plane: ""`,
		"spec.template.spec.tolerations.0.key":                        "node-role.kubernetes.io/control-plane",
		"spec.template.spec.containers.0.image":                       "registry.example.com/netclass/netclass:v0.1.0",
		"spec.template.spec.containers.0.imagePullPolicy":             "Always",
		"spec.template.spec.containers.0.args":                        "- --leader-elect=false\n- --health-address=:9900\n- --metrics-address=\n- --v=4",
		"spec.template.spec.containers.0.resources":                   "limits:\n  memory: 256Mi\nrequests:\n  cpu: 100m\n  memory: 128Mi", // Helm merges maps with the defaults
		"spec.template.spec.containers.0.readinessProbe.httpGet.port": "9900",
		"spec.template.spec.containers.0.env.1.value":                 "10.250.0.1",
		"spec.template.spec.containers.0.env.2.value":                 `"6443"`,
	} {
		if got := asYAML(get(t, dep, what)); got != want {
			t.Errorf("Deployment %s = %s, want %s", what, got, want)
		}
	}
	for what, want := range map[string]string{
		"spec.template.spec.nodeSelector":                             "netclass.dev/node: \"true\"",
		"spec.template.spec.initContainers.0.image":                   "registry.example.com/netclass/netclass:v0.1.0",
		"spec.template.spec.containers.0.image":                       "registry.example.com/netclass/netclass:v0.1.0",
		"spec.template.spec.containers.0.resources":                   "limits:\n  memory: 512Mi\nrequests:\n  cpu: 50m\n  memory: 64Mi",
		"spec.template.spec.containers.0.readinessProbe.httpGet.port": "9901",
		"spec.template.spec.containers.0.env.1.value":                 "10.250.0.1",
	} {
		if got := asYAML(get(t, ds, what)); got != want {
			t.Errorf("DaemonSet %s = %s, want %s", what, got, want)
		}
	}
	if tol := get(t, ds, "spec.template.spec").(map[string]any)["tolerations"]; tol != nil {
		t.Errorf("DaemonSet tolerations %v, want none", tol)
	}
	args := asYAML(get(t, ds, "spec.template.spec.containers.0.args"))
	for _, want := range []string{"--health-address=127.0.0.1:9901", "--metrics-address=\n", "--v=3"} {
		if !strings.Contains(args+"\n", want) {
			t.Errorf("DaemonSet args lack %q:\n%s", want, args)
		}
	}
	for _, c := range []map[string]any{dep, ds} {
		if ports := get(t, c, "spec.template.spec.containers.0").(map[string]any)["ports"]; ports != nil {
			t.Errorf("metrics disabled, yet ports %v", ports)
		}
	}
	mounts := asYAML(get(t, ds, "spec.template.spec.containers.0.volumeMounts")) + asYAML(get(t, ds, "spec.template.spec.volumes"))
	if strings.Count(mounts, "/run/containerd/netns") != 2 || strings.Contains(mounts, "/var/run/netns") {
		t.Errorf("dra.netnsDir not used for the netns volume and its mount:\n%s", mounts)
	}
}
