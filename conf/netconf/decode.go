package netconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/conf/strictjson"
)

// decode unmarshals a configuration into v. Undecodable JSON is CNI error 6;
// a value of the wrong type is error 7 naming the field. netclass's own
// blocks (qos) are decoded strictly, so a misspelt key is an error rather
// than a silently ignored limit.
func decode(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return decodeError(err)
	}
	return strictQoS(data)
}

func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("decode configuration: expected a JSON object, got %s", te.Value), "")
		}
		return types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("%s: cannot use JSON %s as %s", te.Field, te.Value, te.Type), "")
	}
	return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("decode configuration: %v", err), "")
}

// strictQoS rejects unknown keys inside "qos", "runtimeConfig.qos" and
// "args.cni.qos".
func strictQoS(data []byte) error {
	var top struct {
		QoS           json.RawMessage `json:"qos"`
		RuntimeConfig struct {
			QoS json.RawMessage `json:"qos"`
		} `json:"runtimeConfig"`
		Args struct {
			CNI struct {
				QoS json.RawMessage `json:"qos"`
			} `json:"cni"`
		} `json:"args"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return decodeError(err)
	}
	for _, b := range []struct {
		path string
		raw  json.RawMessage
	}{{"qos", top.QoS}, {"runtimeConfig.qos", top.RuntimeConfig.QoS}, {"args.cni.qos", top.Args.CNI.QoS}} {
		if len(b.raw) == 0 {
			continue
		}
		if err := StrictQoS(b.raw); err != nil {
			return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("%s: %v", b.path, err), "")
		}
	}
	return nil
}

// StrictQoS decodes a qos block refusing unknown keys.
func StrictQoS(raw []byte) error {
	var s qos.Spec
	if err := strictjson.Decode(raw, &s); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// invalid turns collected validation problems into CNI error 7 with every
// problem in the message.
func invalid(kind string, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return types.NewError(types.ErrInvalidNetworkConfig,
		fmt.Sprintf("invalid %s configuration: %s", kind, strings.Join(msgs, "; ")), "")
}
