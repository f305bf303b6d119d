package specs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/kjob/kjob/schedule"
)

// Fields lists a spec's fields in the order diffs show them: the file's
// keys, then "paused".
var Fields = []string{"name", "schedule", "at", "start", "end", "jitter", "timezone", "handler", "payload",
	"timeout", "catchup", "retries.max_attempts", "retries.backoff", "retries.max_backoff", "overlap",
	"max_concurrent", "enabled", "paused"}

// Flatten returns a spec's fields as written, by Fields' names; absent
// fields are left out. p, if set, adds "paused" (its note, or "yes").
func Flatten(s *schedule.Spec, p *Pause) map[string]string {
	m := map[string]string{}
	if s == nil {
		return m
	}
	put := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	put("name", s.Name)
	put("schedule", s.Schedule)
	put("at", s.At)
	put("start", s.Start)
	put("end", s.End)
	put("jitter", s.Jitter)
	put("timezone", s.Timezone)
	put("handler", s.Handler)
	if len(s.Payload) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, s.Payload) == nil {
			put("payload", b.String())
		} else {
			put("payload", string(s.Payload))
		}
	}
	put("timeout", s.Timeout)
	put("catchup", s.Catchup)
	if r := s.Retries; r != nil {
		if r.MaxAttempts != 0 {
			put("retries.max_attempts", strconv.Itoa(r.MaxAttempts))
		}
		put("retries.backoff", r.Backoff)
		put("retries.max_backoff", r.MaxBackoff)
	}
	put("overlap", s.Overlap)
	if s.MaxConcurrent != 0 {
		put("max_concurrent", strconv.Itoa(s.MaxConcurrent))
	}
	if s.Enabled != nil {
		put("enabled", strconv.FormatBool(*s.Enabled))
	}
	if p != nil {
		note := p.Note
		if note == "" {
			note = "yes"
		}
		put("paused", note)
	}
	return m
}

// Diff lists the fields that differ between two versions of a job (nil
// before: created; nil after: deleted), in Fields' order.
func Diff(before *schedule.Spec, pb *Pause, after *schedule.Spec, pa *Pause) []FieldDiff {
	a, b := Flatten(before, pb), Flatten(after, pa)
	var out []FieldDiff
	for _, f := range Fields {
		if a[f] != b[f] {
			out = append(out, FieldDiff{Field: f, Before: a[f], After: b[f]})
		}
	}
	return out
}

// Hash returns the SHA-256 (hex) of a spec's JSON form: pass a canonical
// spec (schedule.Job.Spec of the validated job) so that two spellings of
// the same job hash alike. It is the FileHash of a file's entry.
func Hash(s schedule.Spec) string {
	b, _ := json.Marshal(s) // a Spec always marshals; a bad payload was refused by validation
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
