// Package access states the Kafka ACLs each kjob role needs and checks,
// before a component starts, that its principal holds them, so a missing
// grant stops the process with an error naming it instead of a retry loop
// logging TOPIC_AUTHORIZATION_FAILED.
//
// The lists are least privilege: Producer and Worker return exactly the
// grants deploy/SECURITY.md documents (a test keeps the two equal and runs
// both roles against a broker that enforces them). Describe is not listed
// where Read or Write is, since Kafka implies it.
//
// Check uses only side-effect-free requests: Metadata and DescribeGroups
// with authorized operations (KIP-430), CreateTopics with validate-only, and
// FindCoordinator for a transactional id. Two grants cannot be proven that
// way and are returned as unverified: Read/Write on a topic that does not
// exist yet (they are checked once it does), grants on a group the broker
// does not know yet beyond Describe (which Read implies, so a missing Read
// grant is still caught), and Write (as opposed to
// Describe) on a transactional id, which only InitProducerID would show,
// and that fences the current leader.
package access

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kjob/kjob/internal/base/names"
)

// Resource types, spelled as kafka-acls spells them.
const (
	Topic           = "Topic"
	Group           = "Group"
	TransactionalID = "TransactionalId"
)

// Operations, spelled as kafka-acls spells them.
const (
	Read            = "Read"
	Write           = "Write"
	Create          = "Create"
	Describe        = "Describe"
	DescribeConfigs = "DescribeConfigs"
)

// Permission is one ALLOW ACL on a literal resource name.
type Permission struct {
	// Resource is Topic, Group or TransactionalId.
	Resource string
	// Name is the literal resource name.
	Name string
	// Operation is Read, Write, Create, Describe or DescribeConfigs.
	Operation string
}

// String returns e.g. `Topic "kjob.windows" Write`.
func (p Permission) String() string { return fmt.Sprintf("%s %q %s", p.Resource, p.Name, p.Operation) }

// Producer returns the grants a producer needs: it creates and writes the
// windows topic, creates, writes, reads and checks the compaction of the
// state topic, and publishes in transactions under txnID.
//
// Create is needed only while a topic does not exist: an operator who
// creates the topics beforehand (the least-privilege setup) can leave both
// Create grants out.
func Producer(topic, stateTopic, txnID string) []Permission {
	base := []Permission{
		{Topic, topic, Create},
		{Topic, topic, Write},
		{Topic, stateTopic, Create},
		{Topic, stateTopic, Write},
		{Topic, stateTopic, Read},
		{Topic, stateTopic, DescribeConfigs},
		{TransactionalID, txnID, Write},
	}
	return append(base, ProducerSchedules(topic)...)
}

// ProducerSchedules returns the producer's grants for schedules as a log
// (internal/store/specs): it creates, reads and writes the schedules topic
// (and checks its compaction), the change log (and checks that it is kept
// whole) and the control topic
// (requests in, results out) of topic (names.Deployment). Only the
// producer's principal may write the schedules topic and the change log.
func ProducerSchedules(topic string) []Permission {
	d := names.Deployment{Topic: topic}
	specs, log, control := d.SchedulesTopic(), d.ScheduleLogTopic(), d.ControlTopic()
	return []Permission{
		{Topic, specs, Create},
		{Topic, specs, Read},
		{Topic, specs, Write},
		{Topic, specs, DescribeConfigs},
		{Topic, log, Create},
		{Topic, log, Read},
		{Topic, log, Write},
		{Topic, log, DescribeConfigs},
		{Topic, control, Create},
		{Topic, control, Read},
		{Topic, control, Write},
	}
}

// Worker returns the grants a worker needs: it consumes the windows topic
// in group, commits offsets, creates and writes the dead-letter topic, and
// reads operators' replay requests from the control topic and writes its
// acknowledgements there (internal/exec/control), and reads, writes and checks the
// compaction of the store epoch's topic (names.Deployment.EpochTopic of
// topic; internal/store/storeepoch). As for Producer, Create is needed only while a
// topic does not exist.
func Worker(topic, dlqTopic, controlTopic, group string) []Permission {
	epoch := names.Deployment{Topic: topic}.EpochTopic()
	return []Permission{
		{Topic, topic, Read},
		{Group, group, Read},
		{Topic, dlqTopic, Create},
		{Topic, dlqTopic, Write},
		{Topic, controlTopic, Create},
		{Topic, controlTopic, Read},
		{Topic, controlTopic, Write},
		{Topic, epoch, Create},
		{Topic, epoch, Read},
		{Topic, epoch, Write},
		{Topic, epoch, DescribeConfigs},
	}
}

// ErrMissing is wrapped by the error Check returns when the principal lacks
// a grant.
var ErrMissing = errors.New("access: missing Kafka ACL")

// MissingError lists the grants the principal lacks.
type MissingError struct {
	// Missing are the grants the broker refused, in the order asked.
	Missing []Permission
}

// Error names every missing grant and the kafka-acls arguments that add it.
func (e *MissingError) Error() string {
	var b strings.Builder
	b.WriteString("kafka principal lacks ")
	for i, p := range e.Missing {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (kafka-acls --add --allow-principal User:<name> --operation %s --%s %s)", p, p.Operation, aclFlag[p.Resource], p.Name)
	}
	b.WriteString("; deploy/SECURITY.md lists each role's grants")
	return b.String()
}

var aclFlag = map[string]string{Topic: "topic", Group: "group", TransactionalID: "transactional-id"}

// Unwrap returns ErrMissing.
func (e *MissingError) Unwrap() error { return ErrMissing }

var ops = map[string]kmsg.ACLOperation{
	Read:            kmsg.ACLOperationRead,
	Write:           kmsg.ACLOperationWrite,
	Create:          kmsg.ACLOperationCreate,
	Describe:        kmsg.ACLOperationDescribe,
	DescribeConfigs: kmsg.ACLOperationDescribeConfigs,
}

// Check asks the brokers whether cl's principal holds every grant in need.
// It returns the grants it could not prove either way (see the package doc)
// and an error wrapping ErrMissing, as a *MissingError, if any grant is
// refused. Other errors (the cluster unreachable, ctx done) mean nothing
// was decided. A broker without an authorizer grants everything.
func Check(ctx context.Context, cl *kgo.Client, need []Permission) (unverified []Permission, err error) {
	byRes := map[string]map[string][]Permission{}
	for _, p := range need {
		if _, ok := ops[p.Operation]; !ok {
			return nil, fmt.Errorf("access: %v: unknown operation %q; want Read, Write, Create, Describe or DescribeConfigs", p, p.Operation)
		}
		if byRes[p.Resource] == nil {
			byRes[p.Resource] = map[string][]Permission{}
		}
		byRes[p.Resource][p.Name] = append(byRes[p.Resource][p.Name], p)
	}
	var missing []Permission
	for res, names := range byRes {
		var m, u []Permission
		var err error
		switch res {
		case Topic:
			m, u, err = checkTopics(ctx, cl, names)
		case Group:
			m, u, err = checkGroups(ctx, cl, names)
		case TransactionalID:
			m, u, err = checkTxnIDs(ctx, cl, names)
		default:
			return nil, fmt.Errorf("access: resource type %q: want Topic, Group or TransactionalId", res)
		}
		if err != nil {
			return nil, err
		}
		missing = append(missing, m...)
		unverified = append(unverified, u...)
	}
	order := map[Permission]int{}
	for i, p := range need {
		order[p] = i
	}
	sortBy := func(ps []Permission) { sort.Slice(ps, func(i, j int) bool { return order[ps[i]] < order[ps[j]] }) }
	sortBy(missing)
	sortBy(unverified)
	if len(missing) > 0 {
		return unverified, &MissingError{Missing: missing}
	}
	return unverified, nil
}

// allowedBy reports whether bitfield (KIP-430 authorized operations) allows
// op; ok is false when the broker did not say.
func allowedBy(bitfield int32, op kmsg.ACLOperation) (allowed, ok bool) {
	if bitfield == math.MinInt32 {
		return false, false
	}
	return bitfield&(1<<int32(op)) != 0, true
}

func checkTopics(ctx context.Context, cl *kgo.Client, names map[string][]Permission) (missing, unverified []Permission, err error) {
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	for name := range names {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, fmt.Errorf("access: metadata: %w", err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		perms := names[*t.Topic]
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case err == nil:
			for _, p := range perms {
				if p.Operation == Create {
					continue // the topic exists: Create is not needed
				}
				allowed, ok := allowedBy(t.AuthorizedOperations, ops[p.Operation])
				switch {
				case !ok:
					unverified = append(unverified, p)
				case !allowed:
					missing = append(missing, p)
				}
			}
		case errors.Is(err, kerr.TopicAuthorizationFailed):
			// Not even Describe, which Read and Write imply.
			for _, p := range perms {
				if p.Operation != Create {
					missing = append(missing, p)
				}
			}
			if hasOp(perms, Create) {
				m, cerr := canCreate(ctx, cl, *t.Topic)
				if cerr != nil {
					return nil, nil, cerr
				}
				if !m {
					missing = append(missing, Permission{Topic, *t.Topic, Create})
				}
			}
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			for _, p := range perms {
				if p.Operation == Create {
					m, cerr := canCreate(ctx, cl, *t.Topic)
					if cerr != nil {
						return nil, nil, cerr
					}
					if !m {
						missing = append(missing, p)
					}
					continue
				}
				unverified = append(unverified, p)
			}
		default:
			return nil, nil, fmt.Errorf("access: metadata of topic %q: %w", *t.Topic, err)
		}
	}
	return missing, unverified, nil
}

func hasOp(ps []Permission, op string) bool {
	for _, p := range ps {
		if p.Operation == op {
			return true
		}
	}
	return false
}

// canCreate asks the controller to validate, not perform, a topic creation.
func canCreate(ctx context.Context, cl *kgo.Client, name string) (bool, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = true
	req.TimeoutMillis = 10000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = name
	t.NumPartitions = -1
	t.ReplicationFactor = -1
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false, fmt.Errorf("access: validate creating topic %q: %w", name, err)
	}
	for _, rt := range resp.Topics {
		err := kerr.ErrorForCode(rt.ErrorCode)
		switch {
		case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
			return false, nil
		case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
			return true, nil
		case errors.Is(err, kerr.InvalidReplicationFactor), errors.Is(err, kerr.InvalidPartitions), errors.Is(err, kerr.InvalidRequest):
			// Authorization passed; only the probe's settings were refused.
			return true, nil
		default:
			return false, fmt.Errorf("access: validate creating topic %q: %w", name, err)
		}
	}
	return false, fmt.Errorf("access: validate creating topic %q: empty response", name)
}

func checkGroups(ctx context.Context, cl *kgo.Client, names map[string][]Permission) (missing, unverified []Permission, err error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.IncludeAuthorizedOperations = true
	for name := range names {
		req.Groups = append(req.Groups, name)
	}
	resp, err := req.RequestWith(ctx, cl)
	if errors.Is(err, kerr.GroupAuthorizationFailed) {
		// Refused finding the coordinator: not even Describe, which Read
		// implies.
		for _, perms := range names {
			missing = append(missing, perms...)
		}
		return missing, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("access: describe groups: %w", err)
	}
	for _, g := range resp.Groups {
		perms := names[g.Group]
		switch err := kerr.ErrorForCode(g.ErrorCode); {
		case err == nil:
			for _, p := range perms {
				allowed, ok := allowedBy(g.AuthorizedOperations, ops[p.Operation])
				switch {
				case !ok:
					unverified = append(unverified, p)
				case !allowed:
					missing = append(missing, p)
				}
			}
		case errors.Is(err, kerr.GroupAuthorizationFailed):
			missing = append(missing, perms...)
		case errors.Is(err, kerr.GroupIDNotFound):
			// Newer brokers answer this for a group that has no members
			// yet, after the Describe check: other grants are unknown.
			for _, p := range perms {
				if p.Operation != Describe {
					unverified = append(unverified, p)
				}
			}
		default:
			return nil, nil, fmt.Errorf("access: describe group %q: %w", g.Group, err)
		}
	}
	return missing, unverified, nil
}

func checkTxnIDs(ctx context.Context, cl *kgo.Client, names map[string][]Permission) (missing, unverified []Permission, err error) {
	for name, perms := range names {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 1 // transaction
		req.CoordinatorKey = name
		req.CoordinatorKeys = []string{name}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, nil, fmt.Errorf("access: find coordinator of transactional id %q: %w", name, err)
		}
		code := resp.ErrorCode
		if len(resp.Coordinators) > 0 {
			code = resp.Coordinators[0].ErrorCode
		}
		switch err := kerr.ErrorForCode(code); {
		case err == nil, errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.CoordinatorLoadInProgress):
			// Describe is held; Write cannot be proven without fencing.
			for _, p := range perms {
				if p.Operation != Describe {
					unverified = append(unverified, p)
				}
			}
		case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
			missing = append(missing, perms...) // Write implies Describe
		default:
			return nil, nil, fmt.Errorf("access: find coordinator of transactional id %q: %w", name, err)
		}
	}
	return missing, unverified, nil
}
