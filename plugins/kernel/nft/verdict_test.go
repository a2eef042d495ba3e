package nft

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

func attr(typ uint16, val []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(unix.NLA_HDRLEN+len(val)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, val...)
	for len(b)%unix.NLA_ALIGNTO != 0 {
		b = append(b, 0)
	}
	return b
}

func code(k expr.VerdictKind) []byte {
	return attr(unix.NFTA_VERDICT_CODE, binary.BigEndian.AppendUint32(nil, uint32(int32(k))))
}

func TestParseVerdict(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    *expr.Verdict
		wantErr bool
	}{
		{"goto", append(code(expr.VerdictGoto), attr(unix.NFTA_VERDICT_CHAIN, []byte("port/nc1\x00"))...),
			&expr.Verdict{Kind: expr.VerdictGoto, Chain: "port/nc1"}, false},
		{"accept", code(expr.VerdictAccept), &expr.Verdict{Kind: expr.VerdictAccept}, false},
		{"chain first", append(attr(unix.NFTA_VERDICT_CHAIN|unix.NLA_F_NESTED, []byte("x\x00")), code(expr.VerdictJump)...),
			&expr.Verdict{Kind: expr.VerdictJump, Chain: "x"}, false},
		{"empty", nil, nil, true},
		{"no code", attr(unix.NFTA_VERDICT_CHAIN, []byte("x\x00")), nil, true},
		{"short code", attr(unix.NFTA_VERDICT_CODE, []byte{1, 2}), nil, true},
		{"truncated header", []byte{8, 0}, nil, true},
		{"length past the end", []byte{200, 0, 1, 0, 0, 0, 0, 0}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseVerdict(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && *got != *tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzParseVerdict(f *testing.F) {
	f.Add(append(code(expr.VerdictGoto), attr(unix.NFTA_VERDICT_CHAIN, []byte("port/nc1\x00"))...))
	f.Add(code(expr.VerdictDrop))
	f.Add([]byte{5, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseVerdict(b)
		if err == nil && v == nil {
			t.Fatal("nil verdict without an error")
		}
	})
}

func TestUnsupported(t *testing.T) {
	tests := []struct {
		err     error
		feature bool
	}{
		{syscall.EOPNOTSUPP, true},
		{syscall.EAFNOSUPPORT, true},
		{syscall.EPROTONOSUPPORT, true},
		{errors.Join(errors.New("conn.Receive"), syscall.EOPNOTSUPP), true},
		{syscall.EEXIST, false},
		{syscall.ENOENT, false},
		{nil, false},
	}
	for _, tc := range tests {
		err := unsupported(tc.err, "the thing (Linux 9.9)")
		var fe *FeatureError
		if errors.As(err, &fe) != tc.feature {
			t.Errorf("unsupported(%v) = %v, want a FeatureError: %v", tc.err, err, tc.feature)
		}
		if tc.feature && !errors.Is(err, tc.err) {
			t.Errorf("unsupported(%v) = %v does not wrap the cause", tc.err, err)
		}
	}
}
