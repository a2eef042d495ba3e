package nri

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/shim/sandboxes"
)

type watchLog struct{ got []string }

func (w *watchLog) Started(ctx context.Context, s sandboxes.Sandbox) {
	_, budget := ctx.Deadline()
	w.got = append(w.got, "started "+s.Pod.Name+" "+s.ID+" "+s.NetNS+map[bool]string{true: " (budget)"}[budget])
}
func (w *watchLog) Stopped(uid types.UID, id string) {
	w.got = append(w.got, "stopped "+string(uid)+" "+id)
}
func (w *watchLog) Synchronized(list []sandboxes.Sandbox) {
	for _, s := range list {
		w.got = append(w.got, "synchronized "+s.Pod.Name+" "+s.NetNS)
	}
}

// Every sandbox of the node reaches the watcher, with or without netclass
// attachments (the primary network's NetworkQoS needs them all), Started
// within the hook's budget and before the attachments' ADD.
func TestSandboxesReachTheWatcher(t *testing.T) {
	h := newHarness(t)
	w := &watchLog{}
	h.plugin.Sandboxes = w
	h.plugin.setBudget(func() time.Duration { return 2 * time.Second })
	h.put(t, claimRec("c1", "a", 0, "p", dev("blue", "")))
	ctx := context.Background()
	host := h.sandbox("sb-host", "h")
	host.Linux.Namespaces = nil
	for _, sb := range []*api.PodSandbox{h.sandbox("sb1", "p"), h.sandbox("sb9", "nobody"), host} {
		if err := h.plugin.RunPodSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	h.plugin.Wait()
	_ = h.plugin.StopPodSandbox(ctx, h.sandbox("sb9", "nobody"))
	_ = h.plugin.RemovePodSandbox(ctx, h.sandbox("sb1", "p"))
	if _, err := h.plugin.Synchronize(ctx, []*api.PodSandbox{h.sandbox("sb2", "q")}, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"started pod-p sb1 " + h.netns + " (budget)", "started pod-nobody sb9 " + h.netns + " (budget)", "started pod-h sb-host  (budget)",
		"stopped nobody sb9", "stopped p sb1", "synchronized pod-q " + h.netns}
	if !slices.Equal(w.got, want) {
		t.Fatalf("the watcher saw\n%q\nwant\n%q", w.got, want)
	}
}
