// Package field names configuration fields in validation errors, so every
// problem says where it is ("qos.egress[2].dscp: must be 0-63"). It is the
// small, dependency-free cousin of apimachinery's field package: the CNI
// plugins must stay lean, so they do not link Kubernetes libraries.
package field

import (
	"errors"
	"fmt"
	"strconv"
)

// Path is a dotted JSON path. The zero Path is the document root.
type Path string

// Child returns the path of a named member.
func (p Path) Child(name string) Path {
	if p == "" {
		return Path(name)
	}
	return p + "." + Path(name)
}

// Index returns the path of a list element.
func (p Path) Index(i int) Path { return p + Path("["+strconv.Itoa(i)+"]") }

// Error is one invalid field.
type Error struct {
	Path Path
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return string(e.Path) + ": " + e.Msg
}

// Invalid builds an Error with a formatted message.
func Invalid(p Path, format string, args ...any) error {
	return &Error{Path: p, Msg: fmt.Sprintf(format, args...)}
}

// Errors collects problems; Err joins them (nil when there are none).
type Errors []error

// Add records a problem at p.
func (e *Errors) Add(p Path, format string, args ...any) {
	*e = append(*e, Invalid(p, format, args...))
}

// Append records already-built errors (nil ones are dropped).
func (e *Errors) Append(errs ...error) {
	for _, err := range errs {
		if err != nil {
			*e = append(*e, err)
		}
	}
}

// Err returns every recorded problem as one error, or nil.
func (e Errors) Err() error { return errors.Join(e...) }
