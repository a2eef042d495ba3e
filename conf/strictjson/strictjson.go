// Package strictjson decodes JSON as netclass reads untrusted objects: one
// value, every field known, nothing after it but white space.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// ErrTrailing is the error for data after the value.
var ErrTrailing = errors.New("trailing data after the value")

// Decode decodes raw, which must hold exactly one JSON value, into v,
// refusing fields v has not. (A json.Decoder alone stops after the first
// value, and its More reports false before a stray closing bracket.)
func Decode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailing
	}
	return nil
}
