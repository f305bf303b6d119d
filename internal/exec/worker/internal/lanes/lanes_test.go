package lanes

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// sim drives Lanes the way the worker does and records what happened to
// each window, by name.
type sim struct {
	t      *testing.T
	l      *Lanes
	items  map[string]*Item
	events []string
}

func newSim(t *testing.T) *sim { return &sim{t: t, l: New(), items: map[string]*Item{}} }

func (s *sim) apply(d Decision) {
	for _, dr := range d.Drop {
		what := "skip"
		if dr.Superseded {
			what = "supersede"
		}
		s.events = append(s.events, fmt.Sprintf("%s %s by %s", what, dr.Item.Data, dr.By.Data))
	}
	for _, c := range d.Cancel {
		s.events = append(s.events, fmt.Sprintf("cancel %s by %s", c.Item.Data, c.By.Data))
	}
	for _, it := range d.Start {
		s.events = append(s.events, "start "+it.Data.(string))
	}
}

// arrive admits window name (key = its text up to '#') under p.
func (s *sim) arrive(name string, p Policy) {
	key, _, _ := strings.Cut(name, "#")
	it := &Item{Key: key, Policy: p, Data: name}
	s.items[name] = it
	s.apply(s.l.Arrive(it))
}

func (s *sim) finish(name string) {
	it := s.items[name]
	if it == nil || !it.Active() {
		s.t.Fatalf("finish %s: not active", name)
	}
	s.apply(s.l.Finish(it))
}

func (s *sim) want(events ...string) {
	s.t.Helper()
	if !slices.Equal(s.events, events) {
		s.t.Fatalf("events:\n  %s\nwant:\n  %s", strings.Join(s.events, "\n  "), strings.Join(events, "\n  "))
	}
	s.events = nil
}

// Windows of different jobs never wait for each other, whatever their
// policies.
func TestJobsDoNotWaitForEachOther(t *testing.T) {
	for _, p := range []Policy{Queue, Skip, Latest, Replace, Allow} {
		t.Run(p.String(), func(t *testing.T) {
			s := newSim(t)
			s.arrive("slow#1", p)
			s.arrive("fast#1", p)
			s.arrive("other#1", p)
			s.want("start slow#1", "start fast#1", "start other#1")
			s.finish("fast#1")
			s.arrive("fast#2", p)
			s.want("start fast#2")
		})
	}
}

func TestQueueRunsOneAtATimeInOrder(t *testing.T) {
	s := newSim(t)
	s.arrive("j#1", Queue)
	s.arrive("j#2", Queue)
	s.arrive("j#3", Queue)
	s.want("start j#1")
	s.finish("j#1")
	s.want("start j#2")
	s.finish("j#2")
	s.want("start j#3")
	s.finish("j#3")
	s.want()
	if s.l.Len() != 0 {
		t.Fatalf("lanes hold %d items after every window finished", s.l.Len())
	}
}

// Next names the window a queue lane starts when its active one finishes.
func TestNextOfAQueueLane(t *testing.T) {
	s := newSim(t)
	s.arrive("j#1", Queue)
	if n := s.l.Next(s.items["j#1"]); n != nil {
		t.Fatalf("Next of a lane with nothing waiting = %v", n.Data)
	}
	s.arrive("j#2", Queue)
	s.arrive("j#3", Queue)
	if n := s.l.Next(s.items["j#1"]); n == nil || n.Data != "j#2" {
		t.Fatalf("Next = %v, want j#2", n)
	}
	s.arrive("k#1", Latest)
	s.arrive("k#2", Latest)
	if n := s.l.Next(s.items["k#1"]); n != nil {
		t.Fatalf("Next of a latest lane = %v, want nil (its waiting window may still be dropped)", n.Data)
	}
}

func TestSkipDropsArrivalsWhileActive(t *testing.T) {
	s := newSim(t)
	s.arrive("j#1", Skip)
	s.arrive("j#2", Skip)
	s.arrive("j#3", Skip)
	s.want("start j#1", "skip j#2 by j#1", "skip j#3 by j#1")
	s.finish("j#1")
	s.arrive("j#4", Skip)
	s.want("start j#4")
}

func TestLatestKeepsOnlyTheNewestWaiting(t *testing.T) {
	s := newSim(t)
	s.arrive("j#1", Latest)
	s.arrive("j#2", Latest)
	s.arrive("j#3", Latest)
	s.arrive("j#4", Latest)
	s.want("start j#1", "skip j#2 by j#3", "skip j#3 by j#4")
	s.finish("j#1")
	s.want("start j#4")
	s.finish("j#4")
	s.want()
}

func TestReplaceCancelsTheActiveAndDropsTheWaiting(t *testing.T) {
	s := newSim(t)
	s.arrive("j#1", Replace)
	s.arrive("j#2", Replace)
	s.want("start j#1", "cancel j#1 by j#2")
	// j#1 is cancelled but still winding down: a third arrival drops j#2
	// (never started) and does not cancel j#1 again.
	s.arrive("j#3", Replace)
	s.want("supersede j#2 by j#3")
	s.finish("j#1")
	s.want("start j#3")
	if !s.items["j#1"].Cancelled() || s.items["j#3"].Cancelled() {
		t.Fatal("Cancelled() wrong")
	}
}

func TestAllowStartsEveryWindow(t *testing.T) {
	s := newSim(t)
	s.arrive("j#1", Allow)
	s.arrive("j#2", Allow)
	s.arrive("j#3", Allow)
	s.want("start j#1", "start j#2", "start j#3")
	s.finish("j#2")
	s.finish("j#1")
	s.want()
}

// A job's policy may change between windows (a new schedules file): each
// arrival is judged by its own policy.
func TestPolicyChangeMidLane(t *testing.T) {
	s := newSim(t)
	s.arrive("j#1", Queue)
	s.arrive("j#2", Queue)
	s.arrive("j#3", Skip)
	s.want("start j#1", "skip j#3 by j#1")
	s.finish("j#1")
	s.want("start j#2")
}

func TestSlotsBoundAndShareInTurn(t *testing.T) {
	s := NewSlots(3)
	a, b := s.Waiter(), s.Waiter()
	a.Want(10)
	if got := a.Take(); got != 3 {
		t.Fatalf("a got %d of 3 free slots", got)
	}
	b.Want(2)
	if got := b.Take(); got != 0 {
		t.Fatalf("b got %d slots while none were free", got)
	}
	// a is queued for 7 more, b for 2: freed slots alternate, a first
	// (it queued first).
	a.Release(1)
	a.Release(1)
	a.Release(1)
	if ga, gb := a.Take(), b.Take(); ga != 2 || gb != 1 {
		t.Fatalf("after 3 releases a got %d, b got %d; want 2 and 1 in turn", ga, gb)
	}
	select {
	case <-b.C():
	default:
		t.Fatal("b was not signalled")
	}
	b.Want(0) // b no longer wants its remaining slot
	a.Release(2)
	if ga, gb := a.Take(), b.Take(); ga != 2 || gb != 0 {
		t.Fatalf("a got %d, b got %d after b wanted none", ga, gb)
	}
	a.Close()
	b.Close()
	// a holds 2 slots, b 1: none is free until they release them.
	if s.Free() != 0 {
		t.Fatalf("free = %d while all 3 slots are held", s.Free())
	}
	a.Release(2)
	b.Release(1)
	if s.Free() != 3 {
		t.Fatalf("free = %d after every slot came back, want 3", s.Free())
	}
}

// Close gives back granted slots that were never taken and leaves the
// queue.
func TestSlotsClose(t *testing.T) {
	s := NewSlots(1)
	a, b := s.Waiter(), s.Waiter()
	a.Want(1)
	if a.Take() != 1 {
		t.Fatal("a did not get the slot")
	}
	b.Want(1)
	a.Release(1) // granted to b
	b.Close()    // b leaves without taking it
	if s.Free() != 1 {
		t.Fatalf("free = %d after b closed with a granted slot, want 1", s.Free())
	}
	c := s.Waiter()
	c.Want(1)
	if c.Take() != 1 {
		t.Fatal("c did not get the freed slot")
	}
}
