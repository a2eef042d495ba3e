package nri

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
)

// The fake runtime runs in a child process (this test binary, re-executed),
// so that "containerd restarts" is a process dying, connections and all.
const fakeRuntimeEnv = "NETCLASS_FAKE_NRI"

type fakeSandbox struct{ ID, UID, NetNS string }

func (s fakeSandbox) pod() *api.PodSandbox {
	return &api.PodSandbox{Id: s.ID, Uid: s.UID, Namespace: "ns", Name: "pod-" + s.UID,
		Linux: &api.LinuxPodSandbox{Namespaces: []*api.LinuxNamespace{{Type: "network", Path: s.NetNS}}}}
}

type fakeRuntimeConfig struct {
	Socket string
	Dir    string
	Pods   []fakeSandbox // what Synchronize reports
}

func TestMain(m *testing.M) {
	if raw := os.Getenv(fakeRuntimeEnv); raw != "" {
		os.Exit(serveFakeRuntime(raw))
	}
	os.Exit(m.Run())
}

// serveFakeRuntime runs an NRI runtime and relays commands read from stdin:
// "run <id> <uid> <netns>" and "stop <id> <uid> <netns>", answering each
// with "ok" or the error on stdout.
func serveFakeRuntime(raw string) int {
	var cfg fakeRuntimeConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var pods []*api.PodSandbox
	for _, p := range cfg.Pods {
		pods = append(pods, p.pod())
	}
	sync := func(ctx context.Context, cb adaptation.SyncCB) error { _, err := cb(ctx, pods, nil); return err }
	update := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	r, err := adaptation.New("fake-runtime", "v0", sync, update, adaptation.WithSocketPath(cfg.Socket),
		adaptation.WithPluginPath(filepath.Join(cfg.Dir, "plugins")), adaptation.WithPluginConfigPath(filepath.Join(cfg.Dir, "conf")))
	if err == nil {
		err = r.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("started")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 4 {
			fmt.Println("bad command")
			continue
		}
		sb := fakeSandbox{ID: f[1], UID: f[2], NetNS: f[3]}
		switch f[0] {
		case "run":
			err = r.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: sb.pod()})
		case "stop":
			err = r.StopPodSandbox(context.Background(), &api.StopPodSandboxRequest{Pod: sb.pod()})
		}
		if err != nil {
			fmt.Println(strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Println("ok")
		}
	}
	return 0
}

type runtimeProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startFakeRuntime(t *testing.T, cfg fakeRuntimeConfig) *runtimeProc {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeRuntimeEnv+"="+string(raw))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &runtimeProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(p.kill)
	if p.read() != "started" {
		t.Fatal("the fake runtime did not start")
	}
	return p
}

func (p *runtimeProc) read() string {
	if !p.out.Scan() {
		return "(no answer)"
	}
	return p.out.Text()
}

func (p *runtimeProc) do(cmd string, sb fakeSandbox) string {
	fmt.Fprintf(p.in, "%s %s %s %s\n", cmd, sb.ID, sb.UID, sb.NetNS)
	return p.read()
}

// kill SIGKILLs the runtime, as a crash of containerd would.
func (p *runtimeProc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// The plugin serves a real NRI runtime; when that runtime dies and a new one
// comes up on the same socket (containerd restarting), the plugin
// reconnects, is synchronised, attaches the pod that started meanwhile, and
// handles the new runtime's events.
func TestReconnectsToRestartedRuntime(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p1", dev("blue", "")))
	h.put(t, claimRec("c2", "b", 0, "p2", dev("red", "")))
	connects := make(chan struct{}, 4)
	h.plugin.OnConnect = func() { connects <- struct{}{} }
	cfg := fakeRuntimeConfig{Socket: filepath.Join(t.TempDir(), "nri.sock"), Dir: t.TempDir()}
	sb1 := fakeSandbox{ID: "sb1", UID: "p1", NetNS: h.netns}
	sb2 := fakeSandbox{ID: "sb2", UID: "p2", NetNS: h.netns}

	first := startFakeRuntime(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg.Socket, h.plugin, 50*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	<-connects
	// The runtime relays events once the plugin is synchronised, right after
	// it connected: until then RunPodSandbox reaches no plugin.
	waitFor(t, "RunPodSandbox relayed to the plugin", func() bool {
		if got := first.do("run", sb1); got != "ok" {
			t.Fatalf("RunPodSandbox: %s", got)
		}
		return len(h.cni.Calls()) > 0
	})
	if got := h.cni.Calls(); !slices.Equal(got, []string{"ADD blue sb1 net1"}) {
		t.Fatalf("calls %v", got)
	}

	first.kill() // containerd dies; p2 starts while it is away
	cfg.Pods = []fakeSandbox{sb1, sb2}
	second := startFakeRuntime(t, cfg)
	select {
	case <-connects:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not reconnect to the restarted runtime")
	}
	waitFor(t, "late ADD of the pod started meanwhile", func() bool {
		return slices.Contains(h.cni.Calls(), "ADD red sb2 net1")
	})
	if got := second.do("stop", sb1); got != "ok" {
		t.Fatalf("StopPodSandbox: %s", got)
	}
	if !slices.Contains(h.cni.Calls(), "DEL blue sb1 net1") {
		t.Fatalf("no DEL through the new connection: %v", h.cni.Calls())
	}
}
