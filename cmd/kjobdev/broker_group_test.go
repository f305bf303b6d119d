package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The embedded broker must keep a classic group member alive while it
// waits in JoinGroup or SyncGroup, as Kafka does (MemberMetadata's
// shouldKeepAlive): those waits are bounded by the rebalance and pending-sync
// deadlines, not by the session, since a client sends no heartbeats while
// it waits. Upstream kfake expired such a member at its session timeout and
// dropped its request unanswered, so when a worker froze (the chaos run's
// SIGSTOP) right after a join, the others hung in JoinGroup or SyncGroup
// until their clients gave up, 60-70 s, and every partition stalled. kjob
// builds against a patched copy (third_party/kfake, see PATCHES.md); these
// tests fail on the unpatched broker.
//
// Each scenario runs in several groups at once: which member's session
// timer fires first is up to the runtime, and the unpatched broker answers
// the waiting members only when the frozen one's fires first.

const (
	groupSession   = 1000 // ms; the broker below accepts it
	groupRebalance = 20000
	groupsAtOnce   = 6
)

// TestBrokerKeepsMembersWaitingInSync: the group's leader freezes right
// after the join; the followers wait in SyncGroup. The leader is expired at
// its session timeout and the followers get REBALANCE_IN_PROGRESS, then
// rejoin as members (not UNKNOWN_MEMBER_ID: they were not expired).
func TestBrokerKeepsMembersWaitingInSync(t *testing.T) {
	inGroups(t, "sync", func(addrs []string, group string) {
		_, b, c := joinedThree(t, addrs, group) // A, the leader, freezes: it never sends SyncGroup
		together([]*member{b, c}, func(m *member) { m.sync(t, false, kerr.RebalanceInProgress.Code) })
		together([]*member{b, c}, func(m *member) { m.join(t, 0) })
	})
}

// TestBrokerKeepsMembersWaitingInJoin: a stable group of three is joined
// by a fourth; two rejoin and wait in JoinGroup while the third is frozen.
// The frozen one is expired at its session timeout and the other three get
// their join answered, all members.
func TestBrokerKeepsMembersWaitingInJoin(t *testing.T) {
	inGroups(t, "join", func(addrs []string, group string) {
		a, b, c := joinedThree(t, addrs, group)
		together([]*member{a, b, c}, func(m *member) { m.sync(t, m == a, 0) })
		// Stable: A, B, C. D joins (a rebalance), then B and C rejoin and
		// wait with it; A is frozen. (B and C first would be answered at
		// once: a follower rejoining a stable group unchanged.)
		d := newMember(t, addrs, group)
		joined := make(chan struct{})
		go func() { d.join(t, 0); close(joined) }()
		waitGroupMembers(t, addrs, group, 4, func() {
			together([]*member{b, c}, func(m *member) { m.join(t, 0) })
		})
		<-joined
	})
}

// inGroups runs scenario in groupsAtOnce groups at once on one broker.
func inGroups(t *testing.T, prefix string, scenario func(addrs []string, group string)) {
	addrs := groupBroker(t)
	var wg sync.WaitGroup
	for g := range groupsAtOnce {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scenario(addrs, fmt.Sprintf("%s-%d", prefix, g))
		}()
	}
	wg.Wait()
}

// joinedThree makes a group's generation 2 of three members: A joins
// alone (generation 1 at once) and syncs, B and C join, A rejoins. A is the
// leader; none has sent SyncGroup for generation 2.
func joinedThree(t *testing.T, addrs []string, group string) (a, b, c *member) {
	a, b, c = newMember(t, addrs, group), newMember(t, addrs, group), newMember(t, addrs, group)
	a.join(t, 0)
	a.sync(t, true, 0)
	joined := make(chan struct{}, 2)
	go func() { b.join(t, 0); joined <- struct{}{} }()
	go func() { c.join(t, 0); joined <- struct{}{} }()
	waitGroupMembers(t, addrs, group, 3, func() { a.join(t, 0) })
	<-joined
	<-joined
	return a, b, c
}

// together calls f for each member at once and waits for all.
func together(ms []*member, f func(*member)) {
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() { defer wg.Done(); f(m) }()
	}
	wg.Wait()
}

func groupBroker(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// member is one classic group member speaking raw requests on its own
// client (one connection: a request waiting in the broker holds back the
// ones behind it, as on Kafka).
type member struct {
	cl         *kgo.Client
	group, id  string
	generation int32
}

func newMember(t *testing.T, addrs []string, group string) *member {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Error(err)
		return nil
	}
	t.Cleanup(cl.Close)
	return &member{cl: cl, group: group}
}

// join sends JoinGroup (twice for a new member: the first gets its id) and
// wants code back; it fails the test if no answer comes within 10
// sessions, well inside the rebalance deadline.
func (m *member) join(t *testing.T, code int16) {
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group = m.group
		req.MemberID = m.id
		req.SessionTimeoutMillis = groupSession
		req.RebalanceTimeoutMillis = groupRebalance
		req.ProtocolType = "consumer"
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = []string{"t"}
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		p.Metadata = meta.AppendTo(nil)
		req.Protocols = append(req.Protocols, p)
		ctx, cancel := context.WithTimeout(context.Background(), 10*groupSession*time.Millisecond)
		resp, err := req.RequestWith(ctx, m.cl)
		cancel()
		if err != nil {
			t.Errorf("group %s member %q: JoinGroup unanswered: %v", m.group, m.id, err)
			return
		}
		if resp.ErrorCode == kerr.MemberIDRequired.Code {
			m.id = resp.MemberID
			continue
		}
		if resp.ErrorCode != code {
			t.Errorf("group %s member %q: JoinGroup: %v, want %v", m.group, m.id, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(code))
		}
		m.generation = resp.Generation
		return
	}
}

// sync sends SyncGroup (as the leader with an empty assignment for
// itself) and wants code back within 10 sessions.
func (m *member) sync(t *testing.T, leader bool, code int16) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group = m.group
	req.MemberID = m.id
	req.Generation = m.generation
	if leader {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID = m.id
		asn := kmsg.NewConsumerMemberAssignment()
		a.MemberAssignment = asn.AppendTo(nil)
		req.GroupAssignment = append(req.GroupAssignment, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*groupSession*time.Millisecond)
	defer cancel()
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		t.Errorf("group %s member %q: SyncGroup unanswered: %v", m.group, m.id, err)
		return
	}
	if resp.ErrorCode != code {
		t.Errorf("group %s member %q: SyncGroup: %v, want %v", m.group, m.id, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(code))
	}
}

// waitGroupMembers waits until the group lists n members (the new ones
// waiting in JoinGroup), then calls then.
func waitGroupMembers(t *testing.T, addrs []string, group string, n int, then func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{group}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err == nil && len(resp.Groups) == 1 && len(resp.Groups[0].Members) >= n {
			then()
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("group %s: %d members not listed within 10s (%v)", group, n, err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
