package network

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
)

// ToRaw encodes a rendered config for status.config.
func ToRaw(cfg map[string]any) (*runtime.RawExtension, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return &runtime.RawExtension{Raw: raw}, nil
}

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
