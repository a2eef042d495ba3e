package sandboxes

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func sb(name, uid, id, netns string) Sandbox {
	return Sandbox{Pod: types.NamespacedName{Namespace: "ns", Name: name}, UID: types.UID(uid), ID: id, NetNS: netns}
}

// The record follows the runtime's hooks: host-network sandboxes are
// never recorded, a stop forgets only the sandbox it names (not a newer
// one of the same pod), Synchronize replaces everything (a pod's stopped
// sandbox listed next to its running one is kept: its reader finds its
// namespace gone), and every change is announced.
func TestRecord(t *testing.T) {
	changes := 0
	r := &Record{OnChange: func() { changes++ }}
	r.Started(sb("b", "u2", "s2", "/run/netns/b"))
	r.Started(sb("a", "u1", "s1", "/run/netns/a"))
	r.Started(sb("host", "u3", "s3", ""))
	if got, want := r.List(), []Sandbox{sb("a", "u1", "s1", "/run/netns/a"), sb("b", "u2", "s2", "/run/netns/b")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after starts: %v, want %v", got, want)
	}
	r.Started(sb("a", "u1", "s1b", "/run/netns/a2")) // the pod's new sandbox
	r.Stopped("u1", "s1")                            // the old one's stop comes late
	r.Stopped("u1", "s1")                            // twice: nothing to announce
	r.Stopped("u2", "s2")
	r.Stopped("u9", "s9")
	if got, want := r.List(), []Sandbox{sb("a", "u1", "s1b", "/run/netns/a2")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after stops: %v, want %v", got, want)
	}
	if r.Synchronized() {
		t.Error("synchronized before the runtime's list")
	}
	r.Replace([]Sandbox{sb("c", "u4", "s4old", "/run/netns/gone"), sb("c", "u4", "s4", "/run/netns/c"), sb("h", "u5", "s5", "")})
	if got, want := r.List(), []Sandbox{sb("c", "u4", "s4", "/run/netns/c"), sb("c", "u4", "s4old", "/run/netns/gone")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after replace: %v, want %v", got, want)
	}
	if !r.Synchronized() {
		t.Error("not synchronized after the runtime's list")
	}
	if changes != 6 {
		t.Errorf("%d changes announced, want 6 (3 starts, 2 stops, 1 replace)", changes)
	}
}
