// Package message shapes the human-readable messages netclass writes into
// the API (status entries, conditions) to the API's limits.
package message

import "unicode/utf8"

// MaxCondition is the API server's limit of a metav1.Condition's message:
// a longer one makes the whole status update invalid.
const MaxCondition = 32768

// Truncate cuts msg to at most limit (≥ 3) bytes, ending in "...", at a
// character boundary: a message cut inside a UTF-8 sequence is stored with
// U+FFFD in its place, so it never compares equal to the message its
// writer computes again, and would be written again at every sync.
func Truncate(msg string, limit int) string {
	if len(msg) <= limit {
		return msg
	}
	cut := max(limit-3, 0)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}
