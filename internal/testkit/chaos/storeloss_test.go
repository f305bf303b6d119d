package chaos

import (
	"testing"
	"time"
)

// lossHistory is clean(6) of an allow job (so rule (i) does not judge
// window order) with the store down between windows 2 and 3: window 2's
// first attempt (token 50) is a zombie cut off before the loss, and after
// the loss window 2 runs again, then windows 3 to 5, with the tokens from
// first on.
func lossHistory(first int64) History {
	h := clean(6)
	h.Jobs[0].Overlap = OverlapAllow
	down, up := t0.Add(2*time.Second+500*time.Millisecond), t0.Add(2*time.Second+700*time.Millisecond)
	h.StoreLosses = []StoreLoss{{Down: down, Up: up}}
	z := &h.Attempts[2]
	z.Token, z.Worker, z.OK, z.End = 50, "zombie", false, time.Time{}
	id2 := z.Window
	h.Attempts = append(h.Attempts, Attempt{Window: id2, Job: "tick", Token: first, Worker: "w2", Start: up.Add(time.Millisecond), End: up.Add(2 * time.Millisecond), OK: true})
	h.Completions[2].Token = first
	h.States[id2] = State{Status: "done", Token: first}
	for i := 3; i < 6; i++ {
		tok := first + int64(i-2)
		id := h.Published[i].Window
		h.Attempts[i].Token = tok
		h.Completions[i].Token = tok
		h.States[id] = State{Status: "done", Token: tok}
	}
	return h
}

// After a loss the tokens continue above the floor of a new epoch: legal.
func TestStoreLossTokensAboveFloorLegal(t *testing.T) {
	if vs := check(t, lossHistory(1<<32+1)); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
}

// Tokens back at 1 after a loss (a Redis restarted without persistence,
// no store epoch) break rule (l), and so does a token above the earlier
// windows' but not above the zombie's.
func TestStoreLossTokensGoingBackViolate(t *testing.T) {
	expect(t, check(t, lossHistory(1)), "l", wid("tick", 3), "is not above token 50")
	// Above every earlier window's token, but not above the zombie's.
	vs := check(t, lossHistory(10))
	expect(t, vs, "l", wid("tick", 4), "is not above token 50 ("+wid("tick", 2)+", zombie")
	// Without the loss recorded, rule (l) judges nothing.
	h := lossHistory(1)
	h.StoreLosses = nil
	for _, v := range check(t, h) {
		if v.Rule == "l" {
			t.Fatalf("rule (l) without a store loss: %v", v)
		}
	}
}
