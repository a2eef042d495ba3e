package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// parseVerdict decodes the data of a verdict map's element as the kernel
// dumps it: netlink attributes NFTA_VERDICT_CODE (a big-endian int32) and,
// for jump and goto, NFTA_VERDICT_CHAIN (a NUL-terminated name).
// google/nftables v0.3.0 hands the element's data over undecoded (in
// SetElement.Val, with VerdictData nil), so this completes it.
func parseVerdict(b []byte) (*expr.Verdict, error) {
	v := &expr.Verdict{}
	code := false
	for len(b) > 0 {
		if len(b) < unix.NLA_HDRLEN {
			return nil, errors.New("verdict: truncated attribute header")
		}
		n, typ := int(binary.NativeEndian.Uint16(b)), binary.NativeEndian.Uint16(b[2:])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER)
		if n < unix.NLA_HDRLEN || n > len(b) {
			return nil, fmt.Errorf("verdict: attribute length %d out of range", n)
		}
		val := b[unix.NLA_HDRLEN:n]
		switch typ {
		case unix.NFTA_VERDICT_CODE:
			if len(val) != 4 {
				return nil, fmt.Errorf("verdict: code of %d bytes", len(val))
			}
			v.Kind, code = expr.VerdictKind(int32(binary.BigEndian.Uint32(val))), true
		case unix.NFTA_VERDICT_CHAIN:
			v.Chain = strings.TrimRight(string(val), "\x00")
		}
		b = b[min(nlaAlign(n), len(b)):]
	}
	if !code {
		return nil, errors.New("verdict: no code")
	}
	return v, nil
}

func nlaAlign(n int) int { return (n + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1) }
