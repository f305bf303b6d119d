// Package topic creates the Kafka topics kjob uses and checks that existing
// ones have the settings kjob relies on.
//
// kjob's correctness depends on a few topic settings: the windows topic's
// partition count decides which worker owns which job, and the state topic
// must be compacted or the producer's memory of the last published windows
// is deleted by retention. Ensure creates missing topics with the requested
// settings and refuses to run against an existing topic whose settings
// differ, with an error that says what differs and how to fix it.
//
// Three kinds of setting only make kjob slower, less durable or forgetful,
// not wrong, so an existing topic that lacks them is reported as Advice
// (EnsureWithAdvice) rather than refused: a compacted topic's segment
// settings (a broker never compacts the active segment, so a new leader
// reads everything written since the segment rolled: by default up to 7
// days or 1 GiB); with a replication factor of 3 or more,
// min.insync.replicas of at least 2 (otherwise an acknowledged write may
// live on one broker only); and, for a log kept whole (the schedule change
// log), retention.ms and retention.bytes of -1 (otherwise the broker
// deletes its oldest records: the audit trail and the versions a revert
// goes back to).
package topic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kjob/kjob/internal/base/configerr"
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
	// RetainForever requests retention.ms=-1 and retention.bytes=-1: an
	// append-only log kept whole (the schedule change log, an audit
	// trail). An existing topic with a finite retention is advice.
	RetainForever bool
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

// DefaultReplicationFactor is the replication factor of the topics kjob
// creates when its config leaves it zero.
const DefaultReplicationFactor int16 = 1

// Settings of the topics Ensure creates (Spec.Configs).
const (
	// SegmentMs is segment.ms of a compacted topic (Kafka's default is 7
	// days): a broker never compacts the active segment, so a reader of
	// the whole topic (a new leader reading the state) goes through up to
	// this much history beyond one record per key.
	SegmentMs = 60 * 60 * 1000
	// SegmentBytes is segment.bytes of a compacted topic (Kafka's default
	// is 1 GiB): a segment also rolls once it holds this much.
	SegmentBytes = 16 << 20
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio of a compacted
	// topic (Kafka's default is 0.5): the cleaner compacts once a tenth of
	// the log is superseded records, not half.
	MinCleanableDirtyRatio = "0.1"
	// MinInsyncReplicas is min.insync.replicas of a topic created with a
	// replication factor of DurableReplicationFactor or more: a write is
	// acknowledged only once two replicas have it.
	MinInsyncReplicas = 2
	// DurableReplicationFactor is the replication factor from which Ensure
	// sets MinInsyncReplicas (with 2 replicas, min.insync.replicas=2 would
	// stop every write while one broker restarts).
	DurableReplicationFactor = 3
)

// Configs returns the topic configs Ensure creates s with: cleanup.policy,
// segment.ms, segment.bytes and min.cleanable.dirty.ratio for a compacted
// topic, retention.ms and retention.bytes (-1) for one retained forever,
// min.insync.replicas for a replication factor of 3 or more. Every other
// setting is the broker's default.
func (s Spec) Configs() map[string]string {
	c := map[string]string{}
	if s.Compacted {
		c["cleanup.policy"] = "compact"
		c["segment.ms"] = strconv.Itoa(SegmentMs)
		c["segment.bytes"] = strconv.Itoa(SegmentBytes)
		c["min.cleanable.dirty.ratio"] = MinCleanableDirtyRatio
	}
	if s.RetainForever {
		c["retention.ms"] = "-1"
		c["retention.bytes"] = "-1"
	}
	if s.ReplicationFactor >= DurableReplicationFactor {
		c["min.insync.replicas"] = strconv.Itoa(MinInsyncReplicas)
	}
	return c
}

// Advice is a setting of an existing topic that kjob works with but would
// not have created it with (Spec.Configs): it makes a takeover slower, a
// write less durable or a log forget its oldest records, not a window
// wrong. A program logs it as a warning.
type Advice struct {
	// Topic is the topic's name.
	Topic string
	// Config is the topic config, e.g. "segment.ms".
	Config string
	// Has is the topic's effective value ("" if the broker did not say).
	Has string
	// Want is the value kjob creates topics with.
	Want string
	// Why says what the value costs.
	Why string
	// Fix is the command that sets Want.
	Fix string
}

// String says it all in one line.
func (a Advice) String() string {
	has := a.Has
	if has == "" {
		has = "unknown"
	}
	return fmt.Sprintf("topic %s has %s=%s, kjob creates it with %s: %s (fix: %s)", a.Topic, a.Config, has, a.Want, a.Why, a.Fix)
}

// LogAdvice logs each advice as a warning with stable keys (topic, config,
// has, want, why, fix).
func LogAdvice(log *slog.Logger, advice []Advice) {
	for _, a := range advice {
		log.Warn("topic setting is weaker than the one kjob creates the topic with; the warning says what it costs and how to fix it",
			"topic", a.Topic, "config", a.Config, "has", a.Has, "want", a.Want, "why", a.Why, "fix", a.Fix)
	}
}

// Ensure creates each missing topic and verifies each existing one. An
// existing topic whose settings differ gives a *MismatchError (matching
// ErrMismatch); an invalid Spec a *configerr.Error. It is EnsureWithAdvice
// without the advice.
func Ensure(ctx context.Context, adm *kadm.Client, specs ...Spec) error {
	_, err := EnsureWithAdvice(ctx, adm, specs...)
	return err
}

// EnsureWithAdvice is Ensure, and also returns Advice for the existing
// topics whose compaction, durability or retention settings are weaker
// than what Ensure would create (Spec.Configs); a program logs each as a
// warning. A created topic gets no advice.
func EnsureWithAdvice(ctx context.Context, adm *kadm.Client, specs ...Spec) ([]Advice, error) {
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		if err := s.validate(); err != nil {
			return nil, err
		}
		names = append(names, s.Name)
	}
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("topic: list %v: %w", names, err)
	}
	var errs []error
	var advice []Advice
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
		a, err := check(ctx, adm, s, d)
		if err != nil {
			errs = append(errs, err)
		}
		advice = append(advice, a...)
	}
	return advice, errors.Join(errs...)
}

func create(ctx context.Context, adm *kadm.Client, s Spec) error {
	configs := map[string]*string{}
	for k, v := range s.Configs() {
		configs[k] = &v
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

func check(ctx context.Context, adm *kadm.Client, s Spec, d kadm.TopicDetail) ([]Advice, error) {
	var diffs, fields []string
	if n := int32(len(d.Partitions)); n != s.Partitions {
		fields = append(fields, "Spec.Partitions")
		diffs = append(diffs, fmt.Sprintf("has %d partitions, configured %d (set the partitions setting to %d, or add partitions with kafka-topics --alter; note that changing the count moves jobs between partitions)", n, s.Partitions, n))
	}
	if rf := int16(d.Partitions.NumReplicas()); rf != s.ReplicationFactor {
		fields = append(fields, "Spec.ReplicationFactor")
		diffs = append(diffs, fmt.Sprintf("has replication factor %d, configured %d (set the replication factor setting to %d, or reassign the partitions)", rf, s.ReplicationFactor, rf))
	}
	var advice []Advice
	if s.Compacted || s.RetainForever || s.ReplicationFactor >= DurableReplicationFactor {
		configs, err := describe(ctx, adm, s.Name)
		switch {
		case err != nil && s.Compacted:
			return nil, err // compaction is needed for correctness: no guessing
		case err != nil:
			// Durability or retention advice only: a principal without
			// DescribeConfigs on this topic gets none.
		default:
			if s.Compacted {
				policy := "delete"
				if v, ok := configs["cleanup.policy"]; ok {
					policy = v
				}
				if !strings.Contains(policy, "compact") {
					fields = append(fields, "Spec.Compacted")
					diffs = append(diffs, fmt.Sprintf("has cleanup.policy=%s, needs compact (kafka-configs --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact)", policy, s.Name))
				}
			}
			advice = advise(s, configs)
		}
	}
	if len(diffs) == 0 {
		return advice, nil
	}
	return advice, &MismatchError{Topic: s.Name, Fields: fields, Diffs: diffs}
}

// describe returns the effective configs of a topic.
func describe(ctx context.Context, adm *kadm.Client, name string) (map[string]string, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("topic %s: describe configs: %w", name, err)
	}
	rc, err := rcs.On(name, nil)
	if err != nil {
		return nil, fmt.Errorf("topic %s: describe configs: %w", name, err)
	}
	if rc.Err != nil {
		return nil, fmt.Errorf("topic %s: describe configs: %w", name, rc.Err)
	}
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			out[c.Key] = *c.Value
		}
	}
	return out, nil
}

// kafkaDefaults are Apache Kafka's defaults of the configs advise reads,
// for a broker that does not report one.
var kafkaDefaults = map[string]string{
	"segment.ms":                "604800000",
	"segment.bytes":             "1073741824",
	"min.cleanable.dirty.ratio": "0.5",
	"min.insync.replicas":       "1",
	"retention.ms":              "604800000",
	"retention.bytes":           "-1",
}

// advise compares an existing topic's effective configs with Spec.Configs:
// a compaction setting above kjob's, min.insync.replicas below it, or a
// finite retention where kjob keeps the log whole, is advice.
func advise(s Spec, configs map[string]string) []Advice {
	want := s.Configs()
	var out []Advice
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if k == "cleanup.policy" {
			continue // a mismatch, not advice
		}
		has, ok := configs[k]
		if !ok {
			has = kafkaDefaults[k]
		}
		h, herr := strconv.ParseFloat(has, 64)
		w, _ := strconv.ParseFloat(want[k], 64)
		var why string
		switch k {
		case "retention.ms", "retention.bytes":
			if herr != nil || h >= 0 {
				why = "the broker deletes the oldest records past this limit, and this log is meant to be kept whole (the schedule change log: the history kjobctl schedule history shows and the versions revert --to-version goes back to)"
			}
		case "min.insync.replicas":
			if herr != nil || h < w {
				why = fmt.Sprintf("with %d replicas an acknowledged write may live on fewer than %s of them", s.ReplicationFactor, want[k])
			}
		default:
			if herr != nil || h > w {
				why = "the broker keeps the history of a longer span uncompacted (it never compacts the active segment), and a new leader reads all of it before it publishes"
			}
		}
		if why != "" {
			out = append(out, Advice{Topic: s.Name, Config: k, Has: has, Want: want[k], Why: why, Fix: alter(s.Name, k, want[k])})
		}
	}
	return out
}

func alter(topic, config, value string) string {
	return fmt.Sprintf("kafka-configs --bootstrap-server <broker> --alter --entity-type topics --entity-name %s --add-config %s=%s", topic, config, value)
}
