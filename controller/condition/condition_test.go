package condition

import (
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/conf/message"
)

// A message quoting what a user wrote can be of any length; the API server
// refuses a whole status whose condition message is longer than its limit.
// Set cuts it, the same way every time, so the next sync changes nothing.
func TestSetKeepsTheMessageWithinTheAPIsLimit(t *testing.T) {
	long := strings.Repeat("é", message.MaxCondition) // two bytes a character
	var conds []metav1.Condition
	if ch := Set(&conds, New("Ready", metav1.ConditionFalse, "InvalidConfig", long), 3); !ch.Updated || !ch.Transitioned {
		t.Fatalf("first set: %+v", ch)
	}
	got := conds[0].Message
	if len(got) > message.MaxCondition || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Fatalf("message of %d bytes (valid UTF-8: %v), want at most %d ending in ...", len(got), utf8.ValidString(got), message.MaxCondition)
	}
	if ch := Set(&conds, New("Ready", metav1.ConditionFalse, "InvalidConfig", long), 3); ch.Updated {
		t.Fatal("the same long message set again updated the condition")
	}
	if conds[0].ObservedGeneration != 3 {
		t.Fatalf("observedGeneration %d", conds[0].ObservedGeneration)
	}
}
