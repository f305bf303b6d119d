package specs

import (
	"fmt"
	"strings"
	"time"
)

// RefusedError is a Request the leader refused: nothing was changed. It
// wraps ErrConflict, ErrNotFound, ErrInvalid or ErrTooLarge by its
// Refusal's Kind, so callers branch with errors.Is and read the details
// with errors.As.
type RefusedError struct {
	Refusal
	// Expected is the version the edit expected, for a conflict (-1 if it
	// named none).
	Expected int64
}

// Refused returns the error of a Result's refusal of req (nil if s was
// not refused).
func Refused(s *Result, req *Request) error {
	if s.Refused == nil {
		return nil
	}
	e := &RefusedError{Refusal: *s.Refused, Expected: -1}
	if req != nil && s.Refused.Edit >= 0 && s.Refused.Edit < len(req.Edits) {
		if ev := req.Edits[s.Refused.Edit].ExpectVersion; ev != nil {
			e.Expected = *ev
		}
	}
	return e
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule %q: ", e.Job)
	switch e.Kind {
	case RefusedConflict:
		if e.Expected >= 0 {
			fmt.Fprintf(&b, "version conflict: expected version %d, ", e.Expected)
		} else {
			b.WriteString("version conflict: ")
		}
		if e.Current == 0 {
			b.WriteString("it does not exist now")
		} else {
			fmt.Fprintf(&b, "it is at version %d, set by %s", e.Current, e.SetBy)
			if e.Source.Kind != "" {
				fmt.Fprintf(&b, " through %s", DescribeSource(e.Source))
			}
			if !e.SetAt.IsZero() {
				fmt.Fprintf(&b, " at %s", e.SetAt.UTC().Format(time.RFC3339))
			}
		}
		b.WriteString("; read it again, then decide")
		if e.Reason != "" {
			b.WriteString(" (" + e.Reason + ")")
		}
	case RefusedInvalid:
		b.WriteString("invalid: ")
		if e.Field != "" {
			b.WriteString(e.Field + ": ")
		}
		if e.Value != "" {
			fmt.Fprintf(&b, "%q: ", e.Value)
		}
		b.WriteString(e.Reason)
	default:
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Unwrap returns the sentinel of the refusal's kind.
func (e *RefusedError) Unwrap() error {
	switch e.Kind {
	case RefusedConflict:
		return ErrConflict
	case RefusedNotFound:
		return ErrNotFound
	case RefusedTooLarge:
		return ErrTooLarge
	default:
		return ErrInvalid
	}
}

// DescribeSource says where a change came from, for messages: "the
// dashboard", "kjobctl", "the API", "file jobs.yaml (sha256 1a2b3c4d)".
func DescribeSource(s Source) string {
	switch s.Kind {
	case SourceCLI:
		return "kjobctl"
	case SourceDashboard:
		return "the dashboard"
	case SourceAPI:
		return "the API"
	case SourceFile:
		h := s.Hash
		if len(h) > 8 {
			h = h[:8]
		}
		return fmt.Sprintf("file %s (sha256 %s)", s.File, h)
	case SourceMigration:
		return "the migration of the Redis pause list"
	}
	return s.Kind
}
