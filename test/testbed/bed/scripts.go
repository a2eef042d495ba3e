package bed

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/netclass-dev/netclass/test/repo"
)

// AddNode runs `scripts/testbed/node.sh add NAME` (NAME "" for the next default name): a node
// in namespaces of its own joins the running test bed; it returns once the node is Ready.
func AddNode(ctx context.Context, name string) (Node, error) {
	out, err := nodeScript(ctx, "add", name)
	if err != nil {
		return Node{}, err
	}
	lines := strings.Fields(out)
	if len(lines) == 0 {
		return Node{}, fmt.Errorf("node.sh add %s printed no node name", name)
	}
	added := lines[len(lines)-1]
	b, err := Load(StateDir())
	if err != nil {
		return Node{}, err
	}
	n, ok := b.Node(added)
	if !ok {
		return Node{}, fmt.Errorf("node %s was added but %s does not list it", added, NodesKey)
	}
	return n, nil
}

// RemoveNode runs `scripts/testbed/node.sh remove NAME`: the node is drained, its kubelet and
// containerd stopped, its Node object deleted and its namespaces, links and directories removed.
func RemoveNode(ctx context.Context, name string) error {
	_, err := nodeScript(ctx, "remove", name)
	return err
}

func nodeScript(ctx context.Context, args ...string) (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	if args[len(args)-1] == "" {
		args = args[:len(args)-1]
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(root, "scripts", "testbed", "node.sh")}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("node.sh %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}
