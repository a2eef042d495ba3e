package nft

import (
	"errors"
	"fmt"
	"syscall"
)

// FeatureError reports that the kernel lacks an nftables feature the
// attachment's QoS needs. netclass then refuses the QoS rather than fall
// back to a hook whose drops reach the sender's socket as errors.
type FeatureError struct {
	Feature string // what is missing, with the kernel version that has it
	Err     error
}

func (e *FeatureError) Error() string {
	return fmt.Sprintf("this kernel lacks %s, which netclass needs to mark and meter without errors on the pod's sockets: %v", e.Feature, e.Err)
}

func (e *FeatureError) Unwrap() error { return e.Err }

// InvalidConfiguration makes the plugins report it as CNI error 7: the
// configuration asks for something this node's kernel cannot do, and
// retrying will not change that.
func (e *FeatureError) InvalidConfiguration() {}

// unsupported turns the errors nf_tables returns for a hook, family or
// expression it does not know into a *FeatureError naming feature.
func unsupported(err error, feature string) error {
	for _, errno := range []syscall.Errno{syscall.EOPNOTSUPP, syscall.EAFNOSUPPORT, syscall.EPROTONOSUPPORT} {
		if errors.Is(err, errno) {
			return &FeatureError{Feature: feature, Err: err}
		}
	}
	return err
}
