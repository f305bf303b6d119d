package chaos

import (
	"sort"
	"time"
)

// StoreLoss is a time the idempotency store (Redis) was down and may have
// lost data: a restart (with or without persistence), a failover, a flush.
type StoreLoss struct {
	// Down is when the store went down (or was flushed); Up when it
	// answered again.
	Down, Up time.Time
}

// checkStoreLosses is rule (l): a job's fencing tokens never go back
// across a store loss. Every attempt of a job that started after the
// store came back (StoreLoss.Up) carries a token above every token of the
// job's attempts that started before it went down (StoreLoss.Down): the
// store epoch floors the tokens of each new epoch above the earlier ones,
// whatever the counters forgot. (Within a window, rule (c) already orders
// attempts by token.)
func checkStoreLosses(h History, add addFunc) {
	if len(h.StoreLosses) == 0 {
		return
	}
	byJob := map[string][]Attempt{}
	for _, a := range h.Attempts {
		byJob[a.Job] = append(byJob[a.Job], a)
	}
	for _, loss := range h.StoreLosses {
		for _, as := range byJob {
			var top Attempt
			for _, a := range as {
				if a.Start.Before(loss.Down) && a.Token > top.Token {
					top = a
				}
			}
			if top.Token == 0 {
				continue
			}
			var low []Attempt
			for _, a := range as {
				if !a.Start.Before(loss.Up) && a.Token <= top.Token {
					low = append(low, a)
				}
			}
			sort.Slice(low, func(i, j int) bool { return low[i].Start.Before(low[j].Start) })
			for _, a := range low {
				add("l", a.Window, "token %d on %s at %s, after the store came back at %s, is not above token %d (%s, %s) from before it went down at %s",
					a.Token, a.Worker, a.Start.Format(time.RFC3339Nano), loss.Up.Format(time.RFC3339Nano), top.Token, top.Window, top.Worker, loss.Down.Format(time.RFC3339Nano))
			}
		}
	}
}
