package testbed

import "testing"

func TestPollNotes(t *testing.T) {
	var p pollNotes
	for _, n := range []string{"a", "", "a", "b", "b"} {
		p.add(n)
	}
	if got, want := p.String(), "last seen: b; before that: a"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got, want := (pollNotes{last: "x"}).String(), "last seen: x"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
