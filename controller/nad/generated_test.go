package nad

import (
	"slices"
	"testing"
)

// Subscribers hear of every network after the first sync, then of the
// networks whose NADs changed, and of nothing when none did.
func TestGeneratedNotifies(t *testing.T) {
	g := NewGenerated()
	if _, known := g.Of("t1/vx"); known {
		t.Fatal("known before any sync")
	}
	var calls [][]string
	g.Notify(func(networks []string) { calls = append(calls, networks) })
	g.set(byNetwork(map[string]string{"t1/vx": "t1/vx", "a/storage": "storage", "b/storage": "storage"}))
	if nads, known := g.Of("storage"); !known || !slices.Equal(nads, []string{"a/storage", "b/storage"}) {
		t.Errorf("storage: %v %v", nads, known)
	}
	g.set(byNetwork(map[string]string{"t1/vx": "t1/vx", "a/storage": "storage"}))
	g.set(byNetwork(map[string]string{"t1/vx": "t1/vx", "a/storage": "storage"}))
	g.set(nil)
	slices.Sort(calls[len(calls)-1])
	want := [][]string{nil, {"storage"}, {"storage", "t1/vx"}}
	if len(calls) != len(want) || calls[0] != nil || !slices.Equal(calls[1], want[1]) || !slices.Equal(calls[2], want[2]) {
		t.Errorf("notified %q, want %q", calls, want)
	}
	if nads, known := g.Of("t1/vx"); !known || len(nads) != 0 {
		t.Errorf("t1/vx after its NAD went: %v %v", nads, known)
	}
}
