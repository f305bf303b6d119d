package main

// This file bridges to schedule.Spec.Job / schedule.Job.Spec, which helper
// H1 is adding. LEAD: replace specOf with j.Spec() and jobsOfSpecs with
// spec.Job(source) when they land; nothing else in kjobctl depends on how.

import (
	"encoding/json"
	"fmt"

	"github.com/kjob/kjob/schedule"
)

// specOf is j's canonical spec: defaults left out, durations as
// time.Duration prints them, the payload compacted, so two spellings of
// one job give the same spec (and the same specs.Hash).
func specOf(j *schedule.Job) schedule.Spec {
	s := schedule.Spec{Name: j.Name, Schedule: j.Spec, Timezone: j.Timezone, Handler: j.Handler}
	if p := string(j.Payload); p != "" && p != "{}" {
		s.Payload = append(json.RawMessage(nil), j.Payload...)
	}
	if j.Timeout != 0 && j.Timeout != schedule.DefaultTimeout {
		s.Timeout = j.Timeout.String()
	}
	if j.Catchup != 0 {
		s.Catchup = j.Catchup.String()
	}
	r := j.Retries
	if (r.MaxAttempts != 0 && r.MaxAttempts != schedule.DefaultMaxAttempts) || (r.Backoff != 0 && r.Backoff != schedule.DefaultBackoff) ||
		(r.MaxBackoff != 0 && r.MaxBackoff != schedule.DefaultMaxBackoff) {
		rs := &schedule.RetrySpec{}
		if r.MaxAttempts != schedule.DefaultMaxAttempts {
			rs.MaxAttempts = r.MaxAttempts
		}
		if r.Backoff != schedule.DefaultBackoff {
			rs.Backoff = r.Backoff.String()
		}
		if r.MaxBackoff != schedule.DefaultMaxBackoff {
			rs.MaxBackoff = r.MaxBackoff.String()
		}
		s.Retries = rs
	}
	if j.Overlap != "" && j.Overlap != schedule.OverlapQueue {
		s.Overlap = string(j.Overlap)
	}
	s.MaxConcurrent = j.MaxConcurrent
	if !j.Enabled {
		f := false
		s.Enabled = &f
	}
	return s
}

// jobsOfSpecs validates specs exactly as a schedules file's entries (a
// spec's JSON form is a file entry), source naming them in errors. A spec
// that does not validate is left out and its error returned in bad.
func jobsOfSpecs(source string, ss []schedule.Spec) (jobs []*schedule.Job, bad []error) {
	parse := func(ss []schedule.Spec) ([]*schedule.Job, error) {
		b, err := json.MarshalIndent(map[string]any{"jobs": ss}, "", " ")
		if err != nil {
			return nil, err
		}
		f, err := schedule.Parse(source, b)
		if err != nil {
			return nil, err
		}
		return f.Jobs, nil
	}
	if js, err := parse(ss); err == nil {
		return js, nil
	}
	for _, s := range ss { // one at a time, to keep the good ones
		js, err := parse([]schedule.Spec{s})
		if err != nil {
			bad = append(bad, fmt.Errorf("job %q: %w", s.Name, err))
			continue
		}
		jobs = append(jobs, js...)
	}
	return jobs, bad
}
