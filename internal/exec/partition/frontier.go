package partition

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// frontier holds a partition's records from its commit point on, in offset
// order, each with whether it is settled: the commit point is the first
// record not settled. Records are pushed in order and settled in any
// order; advance drops the settled prefix.
type frontier struct {
	recs    []*kgo.Record
	offsets []int64 // recs[i].Offset, searched without touching the records
	settled []bool
	head    int // recs[:head] are gone (compacted away as it grows)
}

// push appends rec, settled already if it needs no processing.
func (f *frontier) push(rec *kgo.Record, settled bool) {
	f.recs = append(f.recs, rec)
	f.offsets = append(f.offsets, rec.Offset)
	f.settled = append(f.settled, settled)
}

// len returns the number of records held.
func (f *frontier) len() int { return len(f.recs) - f.head }

// settle marks the record at offset settled; false if it is not held (or
// settled already).
func (f *frontier) settle(offset int64) bool {
	live := f.offsets[f.head:]
	if len(live) == 0 {
		return false
	}
	// Offsets are dense but for transaction markers: guess first.
	i := int(min(max(offset-live[0], 0), int64(len(live)-1)))
	if live[i] != offset {
		var found bool
		if i, found = slices.BinarySearch(live, offset); !found {
			return false
		}
	}
	if f.settled[f.head+i] {
		return false
	}
	f.settled[f.head+i] = true
	return true
}

// advance drops the settled records at the front and returns the last of
// them (nil if none).
func (f *frontier) advance() *kgo.Record {
	var last *kgo.Record
	for f.head < len(f.recs) && f.settled[f.head] {
		last = f.recs[f.head]
		f.recs[f.head] = nil
		f.head++
	}
	if f.head == len(f.recs) {
		f.recs, f.offsets, f.settled, f.head = f.recs[:0], f.offsets[:0], f.settled[:0], 0
	} else if f.head > 1024 && f.head > len(f.recs)/2 {
		n := copy(f.recs, f.recs[f.head:])
		copy(f.offsets, f.offsets[f.head:])
		copy(f.settled, f.settled[f.head:])
		clear(f.recs[n:])
		f.recs, f.offsets, f.settled, f.head = f.recs[:n], f.offsets[:n], f.settled[:n], 0
	}
	return last
}
