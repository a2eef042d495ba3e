//go:build testbed

// Package kubectl checks what users see with kubectl on the test bed
// (`go test -tags testbed ./test/kubectl/` after `make testbed-up`): bad
// netclass parameters refused at `kubectl apply` by conf/deploy's admission
// policy, naming the field, and `kubectl get netclass` listing every netclass
// object. Claims and Networks are applied as a namespace user bound to a
// tenant's Role; PodNetworks, cluster-scoped, as the admin.
package kubectl

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/repo"
	"github.com/netclass-dev/netclass/test/testbed"
)

func TestMain(m *testing.M) { harness.Main(m) }

// admin runs the test bed's kubectl as its admin.
type admin struct{ kubectl, kubeconfig string }

func newAdmin(t *testing.T) admin {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", `. "$1/scripts/testbed/env.sh" && printf '%s' "$TESTBED_BIN/kubectl"`, "env", root).Output()
	if err != nil {
		t.Fatalf("read scripts/testbed/env.sh: %v", err)
	}
	return admin{kubectl: string(out), kubeconfig: testbed.Kubeconfig(t)}
}

// run runs kubectl with stdin and returns its combined output and error.
func (a admin) run(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, a.kubectl, append([]string{"--kubeconfig", a.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// applier is kubectl apply as some user: the admin, or a tenant.
type applier func(ctx context.Context, yaml string) (string, error)

// refused applies yaml and requires the API server to refuse it with a message
// from netclass's policy holding every want.
func refused(t *testing.T, apply applier, what, yaml string, want ...string) {
	t.Helper()
	out, err := apply(testbed.Context(t, time.Minute), yaml)
	if err == nil {
		t.Errorf("%s was admitted: %s", what, out)
		return
	}
	for _, w := range append([]string{"ValidatingAdmissionPolicy 'netclass-parameters'"}, want...) {
		if !strings.Contains(out, w) {
			t.Errorf("%s: the refusal does not say %q:\n%s", what, w, out)
		}
	}
}

func admitted(t *testing.T, apply applier, what, yaml string) {
	t.Helper()
	if out, err := apply(testbed.Context(t, time.Minute), yaml); err != nil {
		t.Errorf("%s was refused: %v\n%s", what, err, out)
	}
}

// claim is a ResourceClaim whose first config is netclass.dev's AttachmentConfig with fields.
func claim(name, fields string) string {
	return `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: ` + name + `
spec:
  devices:
    requests:
    - name: net
      exactly:
        deviceClassName: netclass
    config:
    - requests: [net]
      opaque:
        driver: netclass.dev
        parameters:
          apiVersion: netclass.dev/v1alpha1
          kind: AttachmentConfig
` + indent(fields, "          ")
}

func indent(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l != "" {
			b.WriteString(prefix + l + "\n")
		}
	}
	return b.String()
}

func podNetwork(name, parameters string) string {
	return `apiVersion: multinetwork.networking.k8s.io/v1
kind: PodNetwork
metadata:
  name: ` + name + `
spec:
  enabled: true
  provider: netclass.dev
  parameters:
` + indent(parameters, "    ")
}

// installPolicy applies conf/deploy's parameters policy, removed when the
// test ends, and waits until the API server enforces it (dryRun applies
// without creating anything).
func installPolicy(t *testing.T, e *harness.Env, dryRun applier) {
	t.Helper()
	created, err := e.ApplyFile(testbed.Context(t, time.Minute), "conf/deploy/33-parameters-policy.yaml", nil)
	t.Cleanup(func() {
		if err := harness.DeleteApplied(created); err != nil {
			t.Errorf("remove the policy: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	probe := claim("probe", "interfaceName: eth0")
	testbed.Poll(t, testbed.Context(t, time.Minute), 250*time.Millisecond, "the admission policy enforced", func(ctx context.Context) (bool, string, error) {
		out, err := dryRun(ctx, probe)
		return err != nil && strings.Contains(out, "netclass-parameters"), out, nil
	})
}
