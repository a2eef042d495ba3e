package network

import (
	"encoding/json"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
)

// SameConfig compares two configs as JSON values (the API server may re-encode them).
func SameConfig(a, b *runtime.RawExtension) bool {
	if a == nil || b == nil || len(a.Raw) == 0 || len(b.Raw) == 0 {
		return (a == nil || len(a.Raw) == 0) == (b == nil || len(b.Raw) == 0)
	}
	var va, vb any
	if json.Unmarshal(a.Raw, &va) != nil || json.Unmarshal(b.Raw, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
