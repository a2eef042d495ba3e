// Package bed reads the contract of the Kubernetes test bed that scripts/testbed runs on this
// machine (scripts/testbed/README.md, "Nodes"): the list of nodes in $STATE_DIR/env and one
// env file per node, and runs commands on a node, inside its network and mount namespaces.
//
// It never talks to the API server; test/testbed checks that the nodes are Ready.
package bed

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	// StateEnv names the environment variable that moves the state directory.
	StateEnv = "NETCLASS_TESTBED_STATE"
	// DefaultStateDir is where scripts/testbed keeps the running test bed's state.
	DefaultStateDir = "/run/netclass-testbed"
	// NodesKey lists the nodes' names, node 1 first, in $STATE_DIR/env.
	NodesKey = "NETCLASS_TESTBED_NODES"
)

// Bed is the running test bed as its scripts describe it.
type Bed struct {
	// StateDir is the scripts' state directory.
	StateDir string
	// Env is $STATE_DIR/env (KUBECONFIG, NETCLASS_TESTBED_BIN, NETCLASS_TESTBED_APISERVER…).
	Env map[string]string
	// Nodes are the nodes, node 1 (this machine's own namespaces) first.
	Nodes []Node
}

// StateDir is $NETCLASS_TESTBED_STATE, or DefaultStateDir.
func StateDir() string {
	if d := os.Getenv(StateEnv); d != "" {
		return d
	}
	return DefaultStateDir
}

// Load reads the test bed's env file and every node's.
func Load(stateDir string) (*Bed, error) {
	envPath := filepath.Join(stateDir, "env")
	env, err := readEnvFile(envPath)
	if err != nil {
		return nil, fmt.Errorf("the test bed is not up (run `make testbed-up`): %w", err)
	}
	names := strings.Fields(env[NodesKey])
	if len(names) == 0 {
		return nil, fmt.Errorf("%s lists no nodes (%s)", envPath, NodesKey)
	}
	b := &Bed{StateDir: stateDir, Env: env}
	for _, name := range names {
		n, err := LoadNode(filepath.Join(stateDir, "nodes", name+".env"))
		if err != nil {
			return nil, err
		}
		if n.Name != name {
			return nil, fmt.Errorf("node env file of %s names node %q", name, n.Name)
		}
		b.Nodes = append(b.Nodes, n)
	}
	if !b.Nodes[0].Primary() {
		return nil, fmt.Errorf("node 1 (%s) has its own namespaces: %s", b.Nodes[0].Name, b.Nodes[0].NetNS)
	}
	return b, nil
}

// Node returns the node of that name.
func (b *Bed) Node(name string) (Node, bool) {
	for _, n := range b.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// Names are the nodes' names, node 1 first.
func (b *Bed) Names() []string {
	out := make([]string, len(b.Nodes))
	for i, n := range b.Nodes {
		out[i] = n.Name
	}
	return out
}

func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env, err := ParseEnv(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return env, nil
}

// ParseEnv reads the scripts' env files: KEY=value or KEY="value" lines (an optional
// "export " before), blank lines and # comments. Values never hold quotes or escapes.
func ParseEnv(r io.Reader) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, value, ok := strings.Cut(strings.TrimPrefix(text, "export "), "=")
		if !ok || key == "" || strings.ContainsAny(key, " \t\"'") {
			return nil, fmt.Errorf("line %d: %q is not KEY=value", line, text)
		}
		if strings.HasPrefix(value, `"`) {
			if len(value) < 2 || !strings.HasSuffix(value, `"`) || strings.Contains(value[1:len(value)-1], `"`) {
				return nil, fmt.Errorf("line %d: unbalanced quotes in %q", line, text)
			}
			value = value[1 : len(value)-1]
		}
		env[key] = value
	}
	return env, sc.Err()
}

// intValue parses an integer value of a node's env file.
func intValue(env map[string]string, key string) (int, error) {
	v, err := strconv.Atoi(env[key])
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", key, env[key], err)
	}
	return v, nil
}
