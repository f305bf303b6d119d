package schedule

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// MaxJitter bounds a job's jitter. A day is the longest cycle of a daily
// job, and a window delayed by more than that would be published after
// windows that are due later; most jobs want seconds to minutes.
const MaxJitter = 24 * time.Hour

// Job validates s exactly as Parse validates one entry of a schedules
// file's "jobs:" list, with the same checks and the same messages, and
// returns the job. source names where the spec came from (a file's path,
// "api", "dashboard", ...); it becomes the job's File and every error's
// File. The job's Line is 0.
//
// The error, as Parse's, is an errors.Join of *ValidationError values,
// each with File source, Line 0, Field the key as in the file without the
// "jobs[i]." prefix ("timezone", "retries.max_attempts"), Value and Msg
// with the fix. The payload must be a JSON object; it is checked as a
// file's payload mapping (JSON is YAML), so a payload too large is
// refused with PayloadTooLarge's words.
func (s Spec) Job(source string) (*Job, error) {
	p := &fileParser{path: source, bare: true}
	j, _ := p.job(0, s.node(p))
	if len(p.errs) > 0 {
		return nil, p.joined()
	}
	j.Line = 0
	return j, nil
}

// node builds the YAML mapping of s, as a file would hold it: empty
// strings and zero numbers are left out, as the JSON form leaves them
// out. A payload that is not a JSON object is reported on p.
func (s Spec) node(p *fileParser) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	add := func(m *yaml.Node, k string, v *yaml.Node) {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, v)
	}
	str := func(m *yaml.Node, k, v string) {
		if v != "" {
			add(m, k, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v})
		}
	}
	num := func(m *yaml.Node, k string, v int) {
		if v != 0 {
			add(m, k, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)})
		}
	}
	str(m, "name", s.Name)
	str(m, "schedule", s.Schedule)
	str(m, "at", s.At)
	str(m, "start", s.Start)
	str(m, "end", s.End)
	str(m, "jitter", s.Jitter)
	str(m, "timezone", s.Timezone)
	str(m, "handler", s.Handler)
	if pl := bytes.TrimSpace(s.Payload); len(pl) > 0 && string(pl) != "null" {
		if v := payloadNode(pl); v != nil {
			add(m, "payload", v)
		} else {
			p.fail(nil, "payload", abbrev(string(pl)), `want a JSON object such as {"url": "http://..."}: the handler gets it as a JSON object`)
		}
	}
	str(m, "timeout", s.Timeout)
	str(m, "catchup", s.Catchup)
	if r := s.Retries; r != nil {
		rm := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		num(rm, "max_attempts", r.MaxAttempts)
		str(rm, "backoff", r.Backoff)
		str(rm, "max_backoff", r.MaxBackoff)
		add(m, "retries", rm)
	}
	str(m, "overlap", s.Overlap)
	num(m, "max_concurrent", s.MaxConcurrent)
	if s.Enabled != nil {
		add(m, "enabled", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(*s.Enabled)})
	}
	return m
}

// payloadNode converts a JSON object into the YAML mapping a file would
// hold, keys in order, strings tagged as strings and numbers as YAML
// numbers; nil if pl is not a JSON object.
func payloadNode(pl []byte) *yaml.Node {
	if !json.Valid(pl) || pl[0] != '{' {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(pl))
	dec.UseNumber()
	n, err := jsonNode(dec)
	if err != nil {
		return nil
	}
	return n
}

// jsonNode reads one JSON value from dec as a YAML node.
func jsonNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	scalar := func(tag, v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v} }
	switch t := tok.(type) {
	case json.Delim:
		var n *yaml.Node
		if t == '{' {
			n = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		} else {
			n = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		}
		for dec.More() {
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, scalar("!!str", k.(string)))
			}
			v, err := jsonNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return scalar("!!str", t), nil
	case json.Number:
		// Untagged, so that YAML resolves it as it resolves the same
		// number in a file (1e400, too large for a float, stays a string).
		return scalar("", string(t)), nil
	case bool:
		return scalar("!!bool", strconv.FormatBool(t)), nil
	default: // nil
		return scalar("!!null", "null"), nil
	}
}

// abbrev shortens a value for an error message.
func abbrev(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Spec returns the canonical Spec of a validated job (one from Parse or
// Spec.Job), the form the schedules topic stores and specs.Hash hashes:
//
//   - a field at its default is left out (timeout 1m, retries 3/1s/1m,
//     overlap queue, enabled true, catchup and jitter 0, timezone UTC
//     written as ""), so a file that spells a default out and one that
//     leaves it out give the same Spec;
//   - durations are written as time.Duration.String gives them ("1m30s");
//   - at, start and end are written in RFC 3339 with the offset of the
//     job's time zone at that instant ("2026-12-01T08:00:00+01:00");
//   - the payload is compact JSON with object keys sorted; "{}" is left
//     out;
//   - name, schedule, timezone and handler are kept as written.
//
// Spec.Job of the result gives the same job back, and ToSpec of that job
// the same Spec: the round trip is stable, and the JSON of the Spec is
// deterministic.
//
// (The method cannot be named Spec: Job already has a field of that name,
// the cron spec.)
func (j *Job) ToSpec() Spec {
	s := Spec{Name: j.Name, Schedule: j.Spec, Timezone: j.Timezone, Handler: j.Handler}
	if j.Location == time.UTC && strings.EqualFold(j.Timezone, "UTC") {
		s.Timezone = ""
	}
	loc := j.Location
	if loc == nil {
		loc = time.UTC
	}
	instant := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.In(loc).Format(time.RFC3339Nano)
	}
	s.At, s.Start, s.End = instant(j.At), instant(j.Start), instant(j.End)
	dur := func(d, def time.Duration) string {
		if d == def {
			return ""
		}
		return d.String()
	}
	s.Jitter = dur(j.Jitter, 0)
	s.Timeout = dur(j.Timeout, DefaultTimeout)
	s.Catchup = dur(j.Catchup, 0)
	if pl := canonicalJSON(j.Payload); pl != nil && string(pl) != "{}" {
		s.Payload = pl
	}
	r := RetrySpec{Backoff: dur(j.Retries.Backoff, DefaultBackoff), MaxBackoff: dur(j.Retries.MaxBackoff, DefaultMaxBackoff)}
	if j.Retries.MaxAttempts != DefaultMaxAttempts {
		r.MaxAttempts = j.Retries.MaxAttempts
	}
	if r != (RetrySpec{}) {
		s.Retries = &r
	}
	if j.Overlap != OverlapQueue {
		s.Overlap = string(j.Overlap)
	}
	s.MaxConcurrent = j.MaxConcurrent
	if !j.Enabled {
		f := false
		s.Enabled = &f
	}
	return s
}

// canonicalJSON returns raw compacted with object keys sorted and without
// HTML escaping, numbers as written; nil if raw is empty or not JSON.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return json.RawMessage(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// Offset returns how long after the nominal start of a window the
// producer publishes it: a value in [0, Jitter), 0 without jitter. It is
// derived from a hash of the job's name and the nominal start in UTC, so
// every replica and every replay computes the same offset, and windows of
// many jobs due at the same instant spread over the jitter. The window's
// identity (its id, its start) stays the nominal start.
//
// As in Temporal Schedules, the offset is also less than the time to the
// job's next window, so that jitter never publishes a window after the
// one that follows it.
func (j *Job) Offset(nominal time.Time) time.Duration {
	if j.Jitter <= 0 {
		return 0
	}
	span := j.Jitter
	if next := j.Next(nominal); !next.IsZero() && next.Sub(nominal) < span {
		span = next.Sub(nominal)
	}
	h := fnv.New64a()
	h.Write([]byte(j.Name))
	var b [9]byte // a separator, then the nominal start
	binary.BigEndian.PutUint64(b[1:], uint64(nominal.UTC().UnixNano()))
	h.Write(b[:])
	return time.Duration(h.Sum64() % uint64(span))
}

// nameRequired is the fix for a job without a name.
const nameRequired = `required: a unique name such as "nightly-report"`

// nameRule is the rule for job names.
const nameRule = "want lower-case letters, digits and '-', at most 63 characters, starting and ending with a letter or digit (like a DNS label)"

// nameProblem says what is wrong with a job name, "" if nothing.
func nameProblem(name string) string {
	if nameRE.MatchString(name) {
		return ""
	}
	if strings.TrimSpace(name) == "" {
		return nameRequired
	}
	for i, r := range name {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(name[i:], "\uFFFD"):
			return fmt.Sprintf("is not valid UTF-8 (byte %d); %s", i, nameRule)
		case unicode.IsControl(r) || !unicode.IsPrint(r):
			return fmt.Sprintf("contains the control character %U at byte %d (a pasted newline or escape?); %s", r, i, nameRule)
		}
	}
	if n := utf8.RuneCountInString(name); n > 63 {
		return fmt.Sprintf("is %d characters long; %s", n, nameRule)
	}
	return nameRule
}

// CheckName reports whether name is a valid job name, as a
// *ValidationError with Field "name" naming the fix (a name given alone,
// as to delete or get a job, has no file: File is ""). The rule is the
// schedules file's: lower-case letters, digits and '-', at most 63
// characters, starting and ending with a letter or digit. Control
// characters, an empty name and a name too long are refused with their
// own words.
func CheckName(name string) error {
	if msg := nameProblem(name); msg != "" {
		return &ValidationError{Field: "name", Value: name, Msg: msg}
	}
	return nil
}

// localLayouts are the layouts of a local date and time.
var localLayouts = []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"}

// parseInstant parses s as RFC 3339 with an offset, or as a local date and
// time read in loc: a wall time in a spring-forward gap means the instant
// the gap ends, a repeated one its first occurrence (as cron specs do).
func parseInstant(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	for _, l := range localLayouts {
		if w, err := time.Parse(l, s); err == nil {
			if loc == nil {
				loc = time.UTC
			}
			if t, ok := resolveFirst(w, loc); ok {
				return t, nil
			}
			return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc).UTC(), nil
		}
	}
	return time.Time{}, errors.New("not a time")
}
