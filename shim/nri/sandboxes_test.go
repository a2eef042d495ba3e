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

// deadlineWatch keeps the deadline Started was given.
type deadlineWatch struct{ deadline time.Time }

func (w *deadlineWatch) Started(ctx context.Context, _ sandboxes.Sandbox) {
	w.deadline, _ = ctx.Deadline()
}
func (w *deadlineWatch) Stopped(types.UID, string)        {}
func (w *deadlineWatch) Synchronized([]sandboxes.Sandbox) {}

// The watcher and the attachments' ADD share one budget, counted from the
// hook's entry: the runtime gives the whole hook that much, not each part.
func TestRunPodSandboxHasOneBudget(t *testing.T) {
	h := newHarness(t)
	w := &deadlineWatch{}
	h.plugin.Sandboxes = w
	h.plugin.setBudget(func() time.Duration { return 2 * time.Second })
	h.put(t, claimRec("c1", "a", 0, "p", dev("blue", "")))
	before := time.Now()
	if err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb1", "p")); err != nil {
		t.Fatal(err)
	}
	h.plugin.Wait()
	h.cni.mu.Lock()
	defer h.cni.mu.Unlock()
	if len(h.cni.deadlines) != 1 || !h.cni.deadlines[0].Equal(w.deadline) || w.deadline.After(before.Add(2*time.Second)) {
		t.Errorf("the watcher's deadline %v, the ADDs' %v: want one, within 2 s of %v", w.deadline, h.cni.deadlines, before)
	}
}
