package preflight

import (
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/store/access"
)

// ScheduleProducerGrants returns the Kafka grants the producer needs for
// schedules as a log (internal/store/specs), beyond access.Producer's, for
// the deployment whose windows topic is topic: it creates, reads and
// writes the schedules topic (reading its specs when it leads, writing
// new versions; DescribeConfigs to check that it is compacted) and the
// schedule change log (appending one change per edit, reading it for a
// revert), and it creates, reads and writes the control topic (requests
// in, results out). As for access.Producer, Create is needed only while a
// topic does not exist.
//
// The producer's principal is the only one with Write on the schedules
// topic and the change log: every change passes through its leader, which
// validates it and records it. deploy/SECURITY.md lists these rows (a
// test keeps the two equal); CheckKafkaAccess checks them at start-up.
func ScheduleProducerGrants(topic string) []access.Permission {
	return access.ProducerSchedules(topic)
}

// ScheduleWriterGrants returns the Kafka grants of a principal that asks
// for schedule changes and reads schedules (kjobctl schedule, the
// dashboard, kjob.Schedules): Write on the control topic (its requests)
// and Read on the control topic (the leader's results), the schedules
// topic and the change log. It writes neither the schedules topic nor the
// log. Kafka does not stamp a principal on records, so Write on the
// control topic is what decides who may ask for changes
// (docs/schedules.md, "Who changed it").
func ScheduleWriterGrants(topic string) []access.Permission {
	d := names.Deployment{Topic: topic}
	return []access.Permission{
		{Resource: access.Topic, Name: d.ControlTopic(), Operation: access.Read},
		{Resource: access.Topic, Name: d.ControlTopic(), Operation: access.Write},
		{Resource: access.Topic, Name: d.SchedulesTopic(), Operation: access.Read},
		{Resource: access.Topic, Name: d.ScheduleLogTopic(), Operation: access.Read},
	}
}
