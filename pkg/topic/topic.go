// Package topic creates the Kafka topics kjob uses and checks that existing
// ones have the settings kjob relies on.
//
// kjob's correctness depends on a few topic settings: the windows topic's
// partition count decides which worker owns which job, and the state topic
// must be compacted or the producer's memory of the last published windows
// is deleted by retention. Ensure creates missing topics with the requested
// settings and refuses to run against an existing topic whose settings
// differ, with an error that says what differs and how to fix it.
package topic

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kjob/kjob/pkg/configerr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrMismatch matches errors about an existing topic whose settings differ
// from what kjob was configured with (a *MismatchError).
var ErrMismatch = errors.New("topic settings mismatch")

// MismatchError is Ensure's error for an existing topic whose settings
// differ from its Spec. It matches ErrMismatch, and names the Spec fields
// that differ (ConfigFields), so a program can point at the settings it
// took them from.
type MismatchError struct {
	// Topic is the topic's name.
	Topic string
	// Fields are the Spec fields that differ: "Spec.Partitions",
	// "Spec.ReplicationFactor", "Spec.Compacted".
	Fields []string
	// Diffs say, for each, what the topic has and how to fix it.
	Diffs []string
}

// Error says what differs and how to fix it.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("topic %s exists but %s: %v", e.Topic, strings.Join(e.Diffs, "; "), ErrMismatch)
}

// Is reports whether target is ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// ConfigFields returns Fields (it implements configerr.Fielder).
func (e *MismatchError) ConfigFields() []string { return e.Fields }

// Spec describes a topic kjob needs.
type Spec struct {
	// Name is the topic name.
	Name string
	// Partitions is the partition count (>= 1).
	Partitions int32
	// ReplicationFactor is the replica count (>= 1).
	ReplicationFactor int16
	// Compacted requests cleanup.policy=compact (the producer's state topic).
	Compacted bool
}

func (s Spec) validate() error {
	switch {
	case s.Name == "":
		return &configerr.Error{Op: "topic", Field: "Spec.Name", Reason: "is empty: name the topic"}
	case s.Partitions < 1:
		return &configerr.Error{Op: "topic " + s.Name, Field: "Spec.Partitions", Value: s.Partitions, Reason: ": must be at least 1"}
	case s.ReplicationFactor < 1:
		return &configerr.Error{Op: "topic " + s.Name, Field: "Spec.ReplicationFactor", Value: s.ReplicationFactor, Reason: ": must be at least 1"}
	}
	return nil
}

// Ensure creates each missing topic and verifies each existing one. An
// existing topic whose settings differ gives a *MismatchError (matching
// ErrMismatch); an invalid Spec a *configerr.Error.
func Ensure(ctx context.Context, adm *kadm.Client, specs ...Spec) error {
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		if err := s.validate(); err != nil {
			return err
		}
		names = append(names, s.Name)
	}
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("topic: list %v: %w", names, err)
	}
	var errs []error
	for _, s := range specs {
		d, ok := details[s.Name]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			if err := create(ctx, adm, s); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: describe: %w", s.Name, d.Err))
			continue
		}
		if err := check(ctx, adm, s, d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func create(ctx context.Context, adm *kadm.Client, s Spec) error {
	var configs map[string]*string
	if s.Compacted {
		compact := "compact"
		configs = map[string]*string{"cleanup.policy": &compact}
	}
	resp, err := adm.CreateTopic(ctx, s.Partitions, s.ReplicationFactor, configs, s.Name)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return nil // another replica created it in the meantime
	}
	if err != nil {
		return fmt.Errorf("topic %s: create with %d partitions, replication factor %d: %w", s.Name, s.Partitions, s.ReplicationFactor, err)
	}
	return nil
}

func check(ctx context.Context, adm *kadm.Client, s Spec, d kadm.TopicDetail) error {
	var diffs, fields []string
	if n := int32(len(d.Partitions)); n != s.Partitions {
		fields = append(fields, "Spec.Partitions")
		diffs = append(diffs, fmt.Sprintf("has %d partitions, configured %d (set the partitions setting to %d, or add partitions with kafka-topics --alter; note that changing the count moves jobs between partitions)", n, s.Partitions, n))
	}
	if rf := int16(d.Partitions.NumReplicas()); rf != s.ReplicationFactor {
		fields = append(fields, "Spec.ReplicationFactor")
		diffs = append(diffs, fmt.Sprintf("has replication factor %d, configured %d (set the replication factor setting to %d, or reassign the partitions)", rf, s.ReplicationFactor, rf))
	}
	if s.Compacted {
		rcs, err := adm.DescribeTopicConfigs(ctx, s.Name)
		if err != nil {
			return fmt.Errorf("topic %s: describe configs: %w", s.Name, err)
		}
		rc, err := rcs.On(s.Name, nil)
		if err != nil {
			return fmt.Errorf("topic %s: describe configs: %w", s.Name, err)
		}
		if rc.Err != nil {
			return fmt.Errorf("topic %s: describe configs: %w", s.Name, rc.Err)
		}
		policy := "delete"
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				policy = *c.Value
			}
		}
		if !strings.Contains(policy, "compact") {
			fields = append(fields, "Spec.Compacted")
			diffs = append(diffs, fmt.Sprintf("has cleanup.policy=%s, needs compact (kafka-configs --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact)", policy, s.Name))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return &MismatchError{Topic: s.Name, Fields: fields, Diffs: diffs}
}
