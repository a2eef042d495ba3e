package harness

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/repo"
	"github.com/netclass-dev/netclass/test/testbed"
)

// Tenant is a namespace user: a user name bound by a Role to what a tenant
// of a netclass cluster may do in its own namespace (Networks, claims and
// claim templates, pods), and nothing else. Tests drive it with kubectl
// --as, the way the user would, so isolation is proven with the tenant's
// RBAC, never the admin's.
type Tenant struct {
	User, Namespace string
	kubectl         string
	kubeconfig      string
}

// tenantRules are the tenant's grants in its namespace: no status
// subresources, nothing cluster-scoped.
var tenantRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"netclass.dev"}, Resources: []string{"networks", "networkqoses"}, Verbs: []string{"*"}},
	{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims", "resourceclaimtemplates"}, Verbs: []string{"*"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"*"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
}

// Tenant creates the tenant of namespace ns (its Role and RoleBinding go with the namespace).
func (e *Env) Tenant(t testing.TB, ns string) Tenant {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	user := "tenant-" + ns
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns}, Rules: tenantRules}
	if _, err := e.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Role %s/tenant: %v", ns, err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if _, err := e.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RoleBinding %s/tenant: %v", ns, err)
	}
	return Tenant{User: user, Namespace: ns, kubectl: kubectl(t), kubeconfig: e.admin}
}

// kubectl is the test bed's kubectl (scripts/testbed/env.sh).
func kubectl(t testing.TB) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", `. "$1/scripts/testbed/env.sh" && printf '%s' "$TESTBED_BIN/kubectl"`, "env", root).Output()
	if err != nil {
		t.Fatalf("read scripts/testbed/env.sh: %v", err)
	}
	return string(out)
}

// Kubectl runs kubectl as the tenant, in its namespace, with stdin, and
// returns its combined output and error.
func (tn Tenant) Kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	args = append([]string{"--kubeconfig", tn.kubeconfig, "--as", tn.User, "-n", tn.Namespace}, args...)
	cmd := exec.CommandContext(ctx, tn.kubectl, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s as %s: %w: %s", strings.Join(args[4:], " "), tn.User, err, out.String())
	}
	return out.String(), err
}

// Apply applies YAML as the tenant and fails the test if kubectl refuses it.
func (tn Tenant) Apply(t testing.TB, yaml string) {
	t.Helper()
	if _, err := tn.Kubectl(testbed.Context(t, time.Minute), yaml, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}
