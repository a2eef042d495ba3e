package deploy_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// apiCall is one API call a binary makes, and where: the package (ours or a
// library the binary links) whose source must contain the regexp. The
// tables below are the complete list; TestRBACIsWhatTheCodeCalls checks them
// against the code in both directions and against conf/deploy's grants.
type apiCall struct {
	need
	pkg, evidence string
}

const mod = "github.com/netclass-dev/netclass/"

func calls(pkg, evidence, group, resource string, verbs ...string) []apiCall {
	out := make([]apiCall, 0, len(verbs))
	for _, v := range verbs {
		out = append(out, apiCall{need{group: group, resource: resource, verb: v}, pkg, evidence})
	}
	return out
}

const (
	mn       = "multinetwork.networking.k8s.io"
	nc       = "netclass.dev"
	res      = "resource.k8s.io"
	record   = "k8s.io/client-go/tools/record"
	slicectl = "k8s.io/dynamic-resource-allocation/resourceslice"
)

// controllerCalls: netclass-controller (controller/README.md).
func controllerCalls() []apiCall {
	var c []apiCall
	add := func(more []apiCall) { c = append(c, more...) }
	add(calls(mod+"controller/podnetwork", `Multinetwork\(\)\.V1\(\)\.PodNetworks\(\)`, mn, "podnetworks", "list", "watch"))
	add(calls(mod+"controller/podnetwork", `PodNetworks\(\)\.Update,`, mn, "podnetworks", "update")) // the finalizer (controller/finalizer)
	add(calls(mod+"controller/podnetwork", `PodNetworks\(\)\.UpdateStatus\(ctx`, mn, "podnetworks/status", "update"))
	add(calls(mod+"controller/networkclass", `NetworkClasses\(\)`, mn, "networkclasses", "list", "watch"))
	add(calls(mod+"controller/networkclass", `NetworkClasses\(\)\.UpdateStatus\(ctx`, mn, "networkclasses/status", "update"))
	add(calls(mod+"controller/clusternetwork", `V1alpha1\(\)\.ClusterNetworks\(\)`, nc, "clusternetworks", "list", "watch"))
	add(calls(mod+"controller/clusternetwork", `ClusterNetworks\(\)\.UpdateStatus\(ctx`, nc, "clusternetworks/status", "update"))
	// NodeNetworks are owned by their ClusterNetwork with blockOwnerDeletion.
	add(calls(mod+"controller/clusternetwork", `metav1\.NewControllerRef\(cn`, nc, "clusternetworks/finalizers", "update"))
	add(calls(mod+"controller/clusternetwork", `V1alpha1\(\)\.NodeNetworks\(\)`, nc, "nodenetworks", "list", "watch"))
	add(calls(mod+"controller/clusternetwork", `nns\.Create\(ctx`, nc, "nodenetworks", "create"))
	add(calls(mod+"controller/clusternetwork", `NodeNetworks\(\)\.Update\(ctx`, nc, "nodenetworks", "update"))
	add(calls(mod+"controller/clusternetwork", `NodeNetworks\(\)\.Delete\(ctx`, nc, "nodenetworks", "delete"))
	add(calls(mod+"controller/clusternetwork", `nns\.UpdateStatus\(ctx`, nc, "nodenetworks/status", "update"))
	add(calls(mod+"controller/network", `V1alpha1\(\)\.Networks\(\)`, nc, "networks", "list", "watch"))
	add(calls(mod+"controller/network", `Networks\(net\.Namespace\)\.UpdateStatus\(ctx`, nc, "networks/status", "update"))
	add(calls(mod+"controller/network", `Networks\(n\.Namespace\)\.Update\(ctx`, nc, "networks", "update")) // the finalizer
	add(calls(mod+"controller/network", `Resource\(\)\.V1\(\)\.ResourceClaims\(\)`, res, "resourceclaims", "list", "watch"))
	add(calls(mod+"controller/network", `Resource\(\)\.V1\(\)\.ResourceSlices\(\)`, res, "resourceslices", "list", "watch"))
	add(calls(mod+"controller/networkqos", `V1alpha1\(\)\.NetworkQoSes\(\)`, nc, "networkqoses", "list", "watch"))
	add(calls(mod+"controller/networkqos", `NetworkQoSes\(ns\)\.UpdateStatus\(ctx`, nc, "networkqoses/status", "update"))
	add(calls(mod+"controller/clusternetwork", `Core\(\)\.V1\(\)\.Nodes\(\)`, "", "nodes", "list", "watch"))
	add(calls(mod+"controller/clusternetwork", `Nodes\(\)\.Patch\(ctx`, "", "nodes", "patch"))
	add(calls(mod+"controller/nodeindex", `Core\(\)\.V1\(\)\.Nodes\(\)`, "", "nodes", "list", "watch"))
	add(calls(mod+"controller/nodeindex", `Nodes\(\)\.Patch\(ctx`, "", "nodes", "patch"))
	add(calls(mod+"controller/podnetwork", `Resource\(\)\.V1\(\)\.ResourceClaims\(\)`, res, "resourceclaims", "list", "watch"))
	add(calls(mod+"controller/podnetwork", `Resource\(\)\.V1\(\)\.ResourceSlices\(\)`, res, "resourceslices", "list", "watch"))
	add(calls(mod+"controller/nad", `Namespace\(metav1\.NamespaceAll\)\.List\(ctx`, "k8s.cni.cncf.io", "network-attachment-definitions", "list"))
	add(calls(mod+"controller/nad", `res\.Get\(ctx`, "k8s.cni.cncf.io", "network-attachment-definitions", "get"))
	add(calls(mod+"controller/nad", `res\.Create\(ctx`, "k8s.cni.cncf.io", "network-attachment-definitions", "create"))
	add(calls(mod+"controller/nad", `res\.Update\(ctx`, "k8s.cni.cncf.io", "network-attachment-definitions", "update"))
	add(calls(mod+"controller/nad", `Namespace\(u\.GetNamespace\(\)\)\.Delete\(ctx`, "k8s.cni.cncf.io", "network-attachment-definitions", "delete"))
	add(calls(mod+"controller/nad", `coreinformers\.NewPodInformer\(kube`, "", "pods", "list", "watch"))
	add(calls(mod+"controller/nad", `kubeInf\.Core\(\)\.V1\(\)\.Namespaces\(\)`, "", "namespaces", "list", "watch"))
	add(calls(record, `sink\.Create\(`, "", "events", "create"))
	add(calls(record, `sink\.Patch\(`, "", "events", "patch"))
	lease := "k8s.io/client-go/tools/leaderelection/resourcelock"
	for verb, ev := range map[string]string{"get": `Leases\(ll\.LeaseMeta\.Namespace\)\.Get\(`, "update": `Leases\(ll\.LeaseMeta\.Namespace\)\.Update\(`} {
		c = append(c, apiCall{need{"coordination.k8s.io", "leases", verb, "netclass-system", "netclass-controller"}, lease, ev})
	}
	return append(c, apiCall{need{"coordination.k8s.io", "leases", "create", "netclass-system", ""}, lease, `Leases\(ll\.LeaseMeta\.Namespace\)\.Create\(`})
}

// draCalls: netclass-dra (shim/README.md).
func draCalls() []apiCall {
	var c []apiCall
	add := func(more []apiCall) { c = append(c, more...) }
	// The kubelet plugin helper publishes the node's slices (owned by the Node).
	add(calls(slicectl, `ResourceSlices\(\)\.List\(ctx`, res, "resourceslices", "list"))
	add(calls(slicectl, `ResourceSlices\(\)\.Watch\(ctx`, res, "resourceslices", "watch"))
	add(calls(slicectl, `ResourceSlices\(\)\.Create\(ctx`, res, "resourceslices", "create"))
	add(calls(slicectl, `ResourceSlices\(\)\.Update\(ctx`, res, "resourceslices", "update"))
	add(calls(slicectl, `ResourceSlices\(\)\.Delete\(ctx`, res, "resourceslices", "delete"))
	add(calls(slicectl, `coreClient\.Nodes\(\)\.Get\(ctx`, "", "nodes", "get"))
	add(calls("k8s.io/dynamic-resource-allocation/kubeletplugin", `ResourceClaims\(claimReq\.Namespace\)\.Get\(ctx`, res, "resourceclaims", "get"))
	add(calls(mod+"shim/peers", `Resource\(\)\.V1\(\)\.ResourceClaims\(\)`, res, "resourceclaims", "list", "watch"))
	// Claim status: apply, or read and update; granular status authorization
	// asks for the driver's associated-node verbs with either.
	add(calls(mod+"shim/status", `ResourceClaims\(namespace\)\.ApplyStatus\(ctx`, res, "resourceclaims/status", "patch"))
	add(calls(mod+"shim/status", `claims\.UpdateStatus\(ctx`, res, "resourceclaims/status", "update"))
	for _, v := range []string{"associated-node:update", "associated-node:patch"} {
		c = append(c, apiCall{need{res, "resourceclaims/driver", v, "", "netclass.dev"}, mod + "shim/status", `ResourceClaims\(namespace\)\.ApplyStatus\(ctx`})
	}
	add(calls(mod+"shim/daemon", `CoreV1\(\)\.Pods\(namespace\)\.Get\(ctx`, "", "pods", "get"))
	add(calls(mod+"shim/daemon", `podFac\.Core\(\)\.V1\(\)\.Pods\(\)`, "", "pods", "list", "watch"))
	add(calls(mod+"shim/peers", `f\.Core\(\)\.V1\(\)\.Namespaces\(\)`, "", "namespaces", "list", "watch"))
	add(calls(mod+"shim/daemon", `f\.Core\(\)\.V1\(\)\.Nodes\(\)`, "", "nodes", "list", "watch"))
	add(calls(record, `sink\.Create\(`, "", "events", "create"))
	add(calls(record, `sink\.Patch\(`, "", "events", "patch"))
	add(calls(mod+"shim/daemon", `mn\.NetworkClasses\(\)\.Informer\(\)`, mn, "networkclasses", "list", "watch"))
	add(calls(mod+"shim/daemon", `mn\.PodNetworks\(\)\.Informer\(\)`, mn, "podnetworks", "list", "watch"))
	add(calls(mod+"shim/daemon", `ncv\.ClusterNetworks\(\)\.Informer\(\)`, nc, "clusternetworks", "list", "watch"))
	add(calls(mod+"shim/daemon", `V1alpha1\(\)\.NodeNetworks\(\)\.Informer\(\)`, nc, "nodenetworks", "list", "watch"))
	add(calls(mod+"shim/daemon", `ncv\.Networks\(\)\.Informer\(\)`, nc, "networks", "list", "watch"))
	add(calls(mod+"shim/daemon", `ncv\.NetworkQoSes\(\)\.Informer\(\)`, nc, "networkqoses", "list", "watch"))
	add(calls(mod+"shim/nodenetwork", `r\.API\.ApplyStatus\(ctx`, nc, "nodenetworks/status", "patch"))
	add(calls(mod+"shim/qosstatus", `\.ApplyStatus\(ctx, ac,`, nc, "networkqoses/status", "patch"))
	add(calls(mod+"shim/daemon", `polFac\.Networking\(\)\.V1\(\)\.NetworkPolicies\(\)`, "networking.k8s.io", "networkpolicies", "list", "watch"))
	add(calls(mod+"shim/daemon", `multiFac\.K8sCniCncfIo\(\)\.V1beta1\(\)\.MultiNetworkPolicies\(\)`, "k8s.cni.cncf.io", "multi-networkpolicies", "list", "watch"))
	add(calls(mod+"shim/daemon", `nadFac\.ForResource\(nadResource\)\.Informer\(\)`, "k8s.cni.cncf.io", "network-attachment-definitions", "list", "watch"))
	add(calls(mod+"shim/daemon", `clusterFac\.Policy\(\)\.V1beta1\(\)\.ClusterNetworkPolicies\(\)`, "policy.networking.k8s.io", "clusternetworkpolicies", "list", "watch"))
	return c
}

// linked returns the packages a command links, import path → directory.
func linked(t *testing.T, cmd string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}", "../../cmd/"+cmd).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", cmd, err)
	}
	pkgs := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if path, dir, ok := strings.Cut(sc.Text(), "\t"); ok {
			pkgs[path] = dir
		}
	}
	return pkgs
}

// source is the non-test Go source of a package directory.
func source(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var b strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(raw)
	}
	return b.String()
}

// accessors maps the typed-client and informer accessor names to resources.
var accessors = map[string]need{
	"Pods": {resource: "pods"}, "Namespaces": {resource: "namespaces"}, "Nodes": {resource: "nodes"},
	"ResourceClaims": {group: res, resource: "resourceclaims"}, "ResourceSlices": {group: res, resource: "resourceslices"},
	"DeviceClasses": {group: res, resource: "deviceclasses"}, "NetworkPolicies": {group: "networking.k8s.io", resource: "networkpolicies"},
	"NetworkClasses": {group: mn, resource: "networkclasses"}, "PodNetworks": {group: mn, resource: "podnetworks"},
	"ClusterNetworks": {group: nc, resource: "clusternetworks"}, "NodeNetworks": {group: nc, resource: "nodenetworks"},
	"Networks": {group: nc, resource: "networks"}, "NetworkQoSes": {group: nc, resource: "networkqoses"},
	"MultiNetworkPolicies":   {group: "k8s.cni.cncf.io", resource: "multi-networkpolicies"},
	"ClusterNetworkPolicies": {group: "policy.networking.k8s.io", resource: "clusternetworkpolicies"},
}

var verbs = map[string][2]string{ // method → verb, subresource
	"Get": {"get", ""}, "List": {"list", ""}, "Watch": {"watch", ""}, "Create": {"create", ""},
	"Update": {"update", ""}, "UpdateStatus": {"update", "/status"}, "Patch": {"patch", ""},
	"Apply": {"patch", ""}, "ApplyStatus": {"patch", "/status"}, "Delete": {"delete", ""}, "DeleteCollection": {"deletecollection", ""},
}

var (
	// informer factories: .V1().Pods() / .V1alpha1().Networks() / .V1beta1().MultiNetworkPolicies()
	informerRE = regexp.MustCompile(`\.V1(?:alpha1|beta1)?\(\)\.(\w+)\(\)`)
	// typed clients called at once: CoreV1().Pods(ns).Get(ctx
	clientRE = regexp.MustCompile(`(?:CoreV1|ResourceV1|NetclassV1alpha1|MultinetworkV1|NetworkingV1)\(\)\.(\w+)\([^()]*\)\.(\w+)\(ctx`)
)

// callSites finds the API calls our own packages make directly, as
// (group, resource, verb): each must be in the binary's table.
func callSites(t *testing.T, pkgs map[string]string) map[need]string {
	t.Helper()
	out := map[need]string{}
	for path, dir := range pkgs {
		if !strings.HasPrefix(path, mod) || strings.HasPrefix(path, mod+"api/generated") {
			continue
		}
		src := source(t, dir)
		for _, m := range informerRE.FindAllStringSubmatch(src, -1) {
			if a, ok := accessors[m[1]]; ok {
				out[need{group: a.group, resource: a.resource, verb: "list"}] = path
				out[need{group: a.group, resource: a.resource, verb: "watch"}] = path
			}
		}
		for _, m := range clientRE.FindAllStringSubmatch(src, -1) {
			a, ok := accessors[m[1]]
			v, isVerb := verbs[m[2]]
			if ok && isVerb {
				out[need{group: a.group, resource: a.resource + v[1], verb: v[0]}] = path
			}
		}
	}
	return out
}

// TestRBACIsWhatTheCodeCalls: for each binary, every call of its table is in
// the code it links, every call its own packages make is in its table, every
// call is granted, and nothing else is granted.
func TestRBACIsWhatTheCodeCalls(t *testing.T) {
	objs := decodeAll(t, "*.yaml")
	for _, b := range []struct {
		cmd, sa string
		calls   []apiCall
	}{
		{"netclass-controller", "netclass-controller", controllerCalls()},
		{"netclass-dra", "netclass-dra", draCalls()},
	} {
		t.Run(b.cmd, func(t *testing.T) {
			pkgs := linked(t, b.cmd)
			sources := map[string]string{}
			table := map[need]bool{}
			for _, c := range b.calls {
				table[need{group: c.group, resource: c.resource, verb: c.verb}] = true
				dir, ok := pkgs[c.pkg]
				if !ok {
					t.Errorf("%s %s: %s is not linked into %s", c.verb, c.resource, c.pkg, b.cmd)
					continue
				}
				if _, done := sources[c.pkg]; !done {
					sources[c.pkg] = source(t, dir)
				}
				if !regexp.MustCompile(c.evidence).MatchString(sources[c.pkg]) {
					t.Errorf("%s %s: %s has no %s: the table claims a call the code does not make", c.verb, c.resource, c.pkg, c.evidence)
				}
			}
			for n, where := range callSites(t, pkgs) {
				if !table[n] {
					t.Errorf("%s calls %s %s.%s, which is not in its table (and so not reviewed for RBAC)", where, n.verb, n.resource, n.group)
				}
			}
			rules := rulesFor(objs, b.sa)
			for _, c := range b.calls {
				if !allows(rules, c.need) {
					t.Errorf("%s may not %s %s.%s (namespace %q, name %q), which %s does", b.sa, c.verb, c.resource, c.group, c.namespace, c.name, c.pkg)
				}
			}
			for _, g := range grants(rules) {
				if !slices.ContainsFunc(b.calls, func(c apiCall) bool { return covers(g, c.need) }) {
					t.Errorf("%s is granted %s, which no code path of %s uses", b.sa, g, b.cmd)
				}
			}
		})
	}
}

// grant is one (group, resource, verb) a bound rule gives, in a namespace and for names.
type grant struct {
	need
	names []string
}

func (g grant) String() string {
	s := fmt.Sprintf("%s %s.%s", g.verb, g.resource, g.group)
	if g.namespace != "" {
		s += " in " + g.namespace
	}
	if len(g.names) > 0 {
		s += fmt.Sprintf(" %v", g.names)
	}
	return s
}

func grants(rules []boundRule) []grant {
	var out []grant
	for _, br := range rules {
		for _, g := range br.rule.APIGroups {
			for _, r := range br.rule.Resources {
				for _, v := range br.rule.Verbs {
					out = append(out, grant{need{group: g, resource: r, verb: v, namespace: br.namespace}, br.rule.ResourceNames})
				}
			}
		}
	}
	return out
}

// covers reports whether a call uses the grant.
func covers(g grant, c need) bool {
	if g.group != c.group || g.resource != c.resource || g.verb != c.verb || (g.namespace != "" && g.namespace != c.namespace) {
		return false
	}
	return len(g.names) == 0 || slices.Contains(g.names, c.name)
}
