package nri

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"
)

func (h *harness) sandboxAt(id string, pod types.UID, netns string) *api.PodSandbox {
	sb := h.sandbox(id, pod)
	sb.Linux.Namespaces[0].Path = netns
	return sb
}

func (h *harness) attachments(uid types.UID) int {
	c, _ := h.store.Get(uid)
	n := 0
	for _, d := range c.Devices {
		n += len(d.Attachments)
	}
	return n
}

// TestReconnectKeepsAttachmentMadeAfterTheList: NRI's Synchronize lists the
// sandboxes, a sandbox starts and is attached, then the reconciliation of
// that list runs: the new attachment is not in the list but must stay (its
// network namespace is not even visible here, so only the epoch keeps it).
func TestReconnectKeepsAttachmentMadeAfterTheList(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p1", dev("blue", "")))
	epoch := h.plugin.epochs.snapshot() // what Synchronize does with its list
	if err := h.plugin.RunPodSandbox(context.Background(), h.sandboxAt("sb-new", "p1", "/nonexistent/netns-new")); err != nil {
		t.Fatal(err)
	}
	h.plugin.Wait()
	h.plugin.reconcile(context.Background(), nil, epoch)
	if calls := h.cni.Calls(); slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "DEL") }) {
		t.Fatalf("the reconciliation deleted an attachment made after its list: %v", calls)
	}
	if n := h.attachments("c1"); n != 1 {
		t.Fatalf("claim c1 has %d attachments, want the new sandbox's", n)
	}
	// The next list, taken after the attachment, without the sandbox: gone.
	h.plugin.Reconcile(context.Background(), nil)
	if n := h.attachments("c1"); n != 0 || !slices.Contains(h.cni.Calls(), "DEL blue sb-new net1") {
		t.Fatalf("a sandbox missing from a later list was not detached: %d attachments, calls %v", n, h.cni.Calls())
	}
}

// TestReconcileKeepsAttachmentWithLiveNetns: missing from the list, made
// before it, but its network namespace still exists: not deleted.
func TestReconcileKeepsAttachmentWithLiveNetns(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p1", dev("blue", "")))
	if err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb1", "p1")); err != nil {
		t.Fatal(err)
	}
	h.plugin.Wait()
	h.plugin.Reconcile(context.Background(), nil)
	if n := h.attachments("c1"); n != 1 {
		t.Fatalf("an attachment whose netns exists was deleted: calls %v", h.cni.Calls())
	}
}

// TestStoppedSandboxDelRetried: a DEL that fails at StopPodSandbox is retried
// in the background until it succeeds.
func TestStoppedSandboxDelRetried(t *testing.T) {
	h := newHarness(t)
	h.plugin.RetryBase = time.Millisecond
	h.put(t, claimRec("c1", "a", 0, "p1", dev("blue", "")))
	sb := h.sandbox("sb1", "p1")
	if err := h.plugin.RunPodSandbox(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	h.plugin.Wait()
	h.cni.mu.Lock()
	h.cni.failDel = 3
	h.cni.mu.Unlock()
	if err := h.plugin.StopPodSandbox(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { h.plugin.WaitRetries(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the DEL was not retried to success: calls %v", h.cni.Calls())
	}
	dels := 0
	for _, c := range h.cni.Calls() {
		if c == "DEL blue sb1 net1" {
			dels++
		}
	}
	if dels != 4 || h.attachments("c1") != 0 {
		t.Fatalf("%d DELs (want 3 failed + 1), %d attachments left", dels, h.attachments("c1"))
	}
}

// TestGCBlockedBySetAsideRecords: with a checkpoint record the daemon could
// not read, GC would remove that record's live attachments: it does not run.
func TestGCBlockedBySetAsideRecords(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p1", dev("blue", "")))
	h.plugin.GCBlocked = "1 checkpoint record could not be read"
	h.plugin.Reconcile(context.Background(), []*api.PodSandbox{h.sandbox("sb1", "p1")})
	if h.cni.gc != nil {
		t.Fatalf("GC ran with a set-aside record: %v", h.cni.gc)
	}
	// The attachment made by the reconciliation carries its time (version 2).
	c, _ := h.store.Get("c1")
	if a := c.Devices[0].Attachments; len(a) != 1 || a[0].AttachedAt == nil || time.Since(*a[0].AttachedAt) > time.Minute {
		t.Fatalf("attachment %+v has no attachedAt", a)
	}
}
