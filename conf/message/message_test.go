package message

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		limit     int
		want      string
	}{
		{"fits", "abc", 3, "abc"},
		{"ascii", "abcdefgh", 6, "abc..."},
		{"inside a character", "ab" + "é" + "cdef", 6, "ab..."}, // "é" is 2 bytes at 2..3: the cut at 3 moves back to 2
		{"at a character", "abc" + "é" + "def", 6, "abc..."},
		{"tiny limit", "abcdef", 2, "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Truncate(tc.msg, tc.limit)
			if got != tc.want || !utf8.ValidString(got) {
				t.Fatalf("Truncate(%q, %d) = %q, want %q", tc.msg, tc.limit, got, tc.want)
			}
		})
	}
	long := strings.Repeat("é", 1000)
	if got := Truncate(long, 1024); len(got) > 1024 || !utf8.ValidString(got) {
		t.Fatalf("%d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}
