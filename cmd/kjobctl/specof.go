package main

import (
	"fmt"

	"github.com/kjob/kjob/schedule"
)

// jobsOfSpecs validates specs exactly as a schedules file's entries
// (schedule.Spec.Job), source naming them in errors. A spec that does not
// validate is left out and its error returned in bad.
func jobsOfSpecs(source string, ss []schedule.Spec) (jobs []*schedule.Job, bad []error) {
	for _, s := range ss {
		j, err := s.Job(source)
		if err != nil {
			bad = append(bad, fmt.Errorf("job %q: %w", s.Name, err))
			continue
		}
		jobs = append(jobs, j)
	}
	return jobs, bad
}
