// Package names derives every name of one kjob deployment from its
// namespace and windows topic: the Kafka topics, the consumer group, the
// producer's transactional id, the producer lease (a Redis key, or a
// Kubernetes Lease), the Redis keys and the ACL key patterns that cover
// them, and the partition a job's windows go to. Every package and binary
// takes these names from here, so two components of one deployment cannot
// disagree on one, and two deployments sharing a Kafka cluster or a Redis
// keep apart by their namespace alone.
//
// # Kafka
//
//	windows topic     Topic, default "kjob.<ns>.windows" ("kjob.windows" for the namespace "kjob")
//	state topic       Topic + ".state"       the producer's last window per job (compacted)
//	dead-letter topic Topic + ".dlq"
//	control topic     Topic + ".control"     operators' seek requests (internal/exec/control) and schedule change requests (internal/store/specs)
//	schedules topic   Topic + ".schedules"   the current spec of each job (compacted, key = job)
//	schedule log      Topic + ".schedules.log" every committed schedule change (append-only, kept forever)
//	consumer group    "kjob-workers-<ns>" ("kjob-workers" for the namespace "kjob")
//	epoch topic       Topic + ".epoch"       the store epoch (internal/store/storeepoch, compacted)
//	transactional id  "kjob-producer-" + Namespace
//
// The default namespace, DefaultNamespace ("kjob"), keeps the names kjob
// has always used, so a deployment that never set a namespace needs no
// change; any other namespace gets topics and a group of its own. A topic
// or group set explicitly wins over the derived one. Window and state
// records carry their namespace (internal/store/jobmsg), so a worker or producer
// pointed at another deployment's topic refuses its records instead of
// running or resuming them.
//
// A window record's key is its job's name, and its partition is
// JobPartition(job, partitions): murmur2 of the key, as Kafka's Java
// client. The producer, kjobctl, the test helpers and the read side all
// partition (or locate) records with it.
//
// # Redis
//
// Keys share a hash tag, so each group of keys lives on one Redis Cluster
// slot:
//
//	kjob:{<ns>}:producer-lease      the producer lease (and its ":epoch" counter)
//	kjob:{<ns>}:paused              the pause list of older versions, migrated into the
//	                                spec by the producer leader (internal/store/pause)
//	kjob:{<ns>}:dlq-redriven        redriven dead letters (internal/ops/operator)
//	kjob:{<ns>}:published:<id>      windows operators published (internal/ops/operator)
//	kjob:{<ns>}:audit               the operators' audit stream (internal/ops/operator)
//	kjob:{<ns>:<job>}:...           one job's idempotency records, fencing
//	                                tokens and run history (internal/store/dedupe)
//	kjob:{<ns>:_stalls}             stalled partitions (internal/store/dedupe)
//	kjob:{<ns>:_epoch}              the store epoch's marker (internal/store/dedupe)
//
// The producer's Redis user needs the per-namespace keys, the worker's the
// per-job ones, the operators' both (ACL key patterns ProducerACLKeys,
// WorkerACLKeys and OperatorACLKeys).
package names

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of a deployment's settings.
const (
	// DefaultNamespace is Deployment.Namespace when it is empty.
	DefaultNamespace = "kjob"
	// DefaultTopic is the windows topic of the default namespace
	// (Deployment.Topic when it is empty and Namespace is
	// DefaultNamespace); another namespace ns defaults to
	// "kjob.<ns>.windows" (see Deployment.WindowsTopic).
	DefaultTopic = "kjob.windows"
	// DefaultGroup is the workers' consumer group of the default
	// namespace; another namespace ns defaults to "kjob-workers-<ns>"
	// (see Deployment.Group).
	DefaultGroup = "kjob-workers"
)

// Suffixes of the topics derived from the windows topic.
const (
	stateSuffix   = ".state"
	dlqSuffix     = ".dlq"
	controlSuffix = ".control"
	epochSuffix   = ".epoch"
	specsSuffix   = ".schedules"
	specLogSuffix = ".schedules.log"
)

// Deployment is one kjob deployment, named by its namespace (which
// prefixes its Redis keys, its transactional id and, by default, its
// topics and consumer group) and its windows topic (which prefixes its
// other topics). A zero field takes its default. The methods return the
// derived names; a component with a setting of its own for one of them (a
// flag such as --dlq-topic or --group) uses that instead.
type Deployment struct {
	// Namespace names the deployment: letters, digits, '_', '.', '-'.
	// Default DefaultNamespace.
	Namespace string
	// Topic is the windows topic. Default DefaultTopic for the default
	// namespace, "kjob.<ns>.windows" for any other (DefaultTopicOf).
	Topic string
}

// WithDefaults returns d with its zero fields set to their defaults.
func (d Deployment) WithDefaults() Deployment {
	if d.Namespace == "" {
		d.Namespace = DefaultNamespace
	}
	if d.Topic == "" {
		d.Topic = DefaultTopicOf(d.Namespace)
	}
	return d
}

// DefaultTopicOf returns the default windows topic of namespace ns:
// DefaultTopic ("kjob.windows") for DefaultNamespace or "", which is what
// every deployment used before topics derived from the namespace, and
// "kjob.<ns>.windows" for any other.
func DefaultTopicOf(ns string) string {
	if ns == "" || ns == DefaultNamespace {
		return DefaultTopic
	}
	return "kjob." + ns + ".windows"
}

// DefaultGroupOf returns the default consumer group of namespace ns:
// DefaultGroup ("kjob-workers") for DefaultNamespace or "", and
// "kjob-workers-<ns>" for any other.
func DefaultGroupOf(ns string) string {
	if ns == "" || ns == DefaultNamespace {
		return DefaultGroup
	}
	return DefaultGroup + "-" + ns
}

// Group returns the workers' consumer group: DefaultGroupOf(Namespace).
// It does not depend on Topic, so a deployment that sets its topic keeps
// its group.
func (d Deployment) Group() string { return DefaultGroupOf(d.WithDefaults().Namespace) }

// WindowsTopic returns the windows topic.
func (d Deployment) WindowsTopic() string { return d.WithDefaults().Topic }

// StateTopic returns the producer's state topic: the windows topic +
// ".state".
func (d Deployment) StateTopic() string { return d.WindowsTopic() + stateSuffix }

// DeadLetterTopic returns the dead-letter topic: the windows topic +
// ".dlq".
func (d Deployment) DeadLetterTopic() string { return d.WindowsTopic() + dlqSuffix }

// ControlTopic returns the control topic of operators' replays: the
// windows topic + ".control".
func (d Deployment) ControlTopic() string { return d.WindowsTopic() + controlSuffix }

// SchedulesTopic returns the compacted topic holding the current spec of
// each job (internal/store/specs): the windows topic + ".schedules".
func (d Deployment) SchedulesTopic() string { return d.WindowsTopic() + specsSuffix }

// ScheduleLogTopic returns the append-only change log of the schedules
// (internal/store/specs), kept forever: the windows topic +
// ".schedules.log".
func (d Deployment) ScheduleLogTopic() string { return d.WindowsTopic() + specLogSuffix }

// EpochTopic returns the store epoch's topic, compacted, where workers
// keep the epoch that floors the fencing tokens across a Redis that loses
// its data (internal/store/storeepoch): the windows topic + ".epoch".
func (d Deployment) EpochTopic() string { return d.WindowsTopic() + epochSuffix }

// TransactionalID returns the producer's transactional id,
// "kjob-producer-<namespace>": the same for every producer replica of the
// deployment, different from any other deployment's.
func (d Deployment) TransactionalID() string { return "kjob-producer-" + d.WithDefaults().Namespace }

// LeaseName returns the name of the producers' Kubernetes Lease,
// "kjob-producer-<namespace>".
func (d Deployment) LeaseName() string { return "kjob-producer-" + d.WithDefaults().Namespace }

// Tag returns the hash tag of the deployment's own keys, "kjob:{<ns>}".
func (d Deployment) Tag() string { return "kjob:{" + d.WithDefaults().Namespace + "}" }

// Key returns the deployment's key called name, "kjob:{<ns>}:<name>".
func (d Deployment) Key(name string) string { return d.Tag() + ":" + name }

// LeaseKey returns the Redis key of the producer lease,
// "kjob:{<ns>}:producer-lease".
func (d Deployment) LeaseKey() string { return d.Key("producer-lease") }

// PausedKey returns the hash of the pause list of kjob before pauses moved
// into the spec, "kjob:{<ns>}:paused" (internal/store/pause).
func (d Deployment) PausedKey() string { return d.Key("paused") }

// RedrivenKey returns the hash of redriven dead letters,
// "kjob:{<ns>}:dlq-redriven".
func (d Deployment) RedrivenKey() string { return d.Key("dlq-redriven") }

// PublishedPrefix returns the prefix of the markers of windows operators
// published, "kjob:{<ns>}:published:" (the window id follows).
func (d Deployment) PublishedPrefix() string { return d.Key("published:") }

// AuditKey returns the operators' audit stream, "kjob:{<ns>}:audit".
func (d Deployment) AuditKey() string { return d.Key("audit") }

// JobKeyPrefix returns what every per-job key starts with, "kjob:{<ns>:";
// a job's keys are JobTag(job) + ":" + name.
func (d Deployment) JobKeyPrefix() string { return "kjob:{" + d.WithDefaults().Namespace + ":" }

// JobTag returns the hash tag of job's keys, "kjob:{<ns>:<job>}": a job's
// idempotency records, fencing token counter and run history share one
// Redis Cluster slot.
func (d Deployment) JobTag(job string) string { return d.JobKeyPrefix() + job + "}" }

// JobKey returns job's key called name, "kjob:{<ns>:<job>}:<name>".
func (d Deployment) JobKey(job, name string) string { return d.JobTag(job) + ":" + name }

// StallsKey returns the hash of stalled partitions, "kjob:{<ns>:_stalls}":
// inside the workers' key pattern, under a hash tag no job can have (job
// names have no '_').
func (d Deployment) StallsKey() string { return d.JobTag("_stalls") }

// StoreEpochKey returns the hash of the store epoch's marker,
// "kjob:{<ns>:_epoch}": inside the workers' key pattern, under a hash tag
// no job can have (see StallsKey).
func (d Deployment) StoreEpochKey() string { return d.JobTag("_epoch") }

// ProducerACLKeys returns the Redis ACL key pattern of the producer's
// user: the deployment's own keys, "~kjob:{<ns>}:*".
func (d Deployment) ProducerACLKeys() string { return "~" + d.Tag() + ":*" }

// WorkerACLKeys returns the Redis ACL key pattern of the workers' user:
// the per-job keys, "~kjob:{<ns>:*".
func (d Deployment) WorkerACLKeys() string { return "~" + d.JobKeyPrefix() + "*" }

// OperatorACLKeys returns the Redis ACL key patterns of the operators'
// user (kjobctl, the dashboard): both, "~kjob:{<ns>}:* ~kjob:{<ns>:*".
func (d Deployment) OperatorACLKeys() string { return d.ProducerACLKeys() + " " + d.WorkerACLKeys() }

// ValidNamespace reports whether ns is a valid namespace (letters, digits,
// '_', '.', '-'; not empty), and if not, the first rune that is not
// allowed (0 for an empty ns).
func ValidNamespace(ns string) (bad rune, ok bool) {
	if ns == "" {
		return 0, false
	}
	for _, r := range ns {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return r, false
		}
	}
	return 0, true
}

// Partitioner returns the partitioner of window records: murmur2 of the
// record key (the job name), as Kafka's Java client, so every window of a
// job lands on one partition and every writer agrees which. Use it with
// kgo.RecordPartitioner for any client that writes to the windows topic.
func Partitioner() kgo.Partitioner { return kgo.StickyKeyPartitioner(nil) }

// JobPartition returns the partition of job's records in a windows topic
// of partitions partitions, as Partitioner places them.
func JobPartition(job string, partitions int) int32 {
	if partitions <= 0 {
		return 0
	}
	return int32(Partitioner().ForTopic("").Partition(&kgo.Record{Key: []byte(job)}, partitions))
}
