package producer

import (
	"encoding/hex"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

// liveJob is one job of the schedules topic as the leader (or a standby's
// view) knows it: the validated job and its record's metadata (version,
// pause, who set it), but not the record's spec: that is rebuilt from the
// job when needed (spec), as every record a leader writes holds exactly
// job.ToSpec(). A view of 100,000 jobs holds one copy of each spec, in its
// job, instead of two (docs/performance.md, schedules as a log).
type liveJob struct {
	job     *schedule.Job
	version int64
	paused  *specs.Pause
	// origin is who set this version, shared by the jobs one change
	// request set alike.
	origin *origin
	// change is the index of the record's change in its request: the
	// record's ChangeID is origin.changes + "/" + change, as a leader
	// writes it (Change.ID), or origin.changes alone when change is -1
	// (an id of another form). One string per request instead of one per
	// job.
	change int32
	// fileHash is the record's FileHash.
	fileHash *fileHash
	// raw is the record's spec when it is not job.ToSpec() (a record this
	// kjob's leaders do not write: a payload with escaped characters, a
	// non-canonical duration...); nil otherwise, which is every record a
	// leader wrote.
	raw *schedule.Spec
}

// origin is the part of a record that the jobs of one change request
// share.
type origin struct {
	setBy         string
	source        specs.Source
	note          string
	setAt         time.Time
	effectiveFrom time.Time
	changes       string // see liveJob.change
}

// fileHash is a record's FileHash: a SHA-256 in hex (specs.Hash) as its 32
// bytes; any other string (a record written by hand) as it is, in odd. A
// view holds a pointer, nil for a record without one (every job not from
// a file): 8 bytes a job, 56 with a hash, instead of 16 and 80 for the hex
// string (docs/performance.md, "100k schedules: producer RSS").
type fileHash struct {
	sum [32]byte
	odd string
}

func newFileHash(h string) *fileHash {
	if h == "" {
		return nil
	}
	f := &fileHash{}
	if len(h) == 2*len(f.sum) && strings.ToLower(h) == h {
		if _, err := hex.Decode(f.sum[:], []byte(h)); err == nil {
			return f
		}
	}
	f.odd = h
	return f
}

// String returns the hash as the record holds it.
func (f *fileHash) String() string {
	switch {
	case f == nil:
		return ""
	case f.odd != "":
		return f.odd
	}
	return hex.EncodeToString(f.sum[:])
}

// is reports whether the hash is h.
func (f *fileHash) is(h string) bool { return f.String() == h }

// splitChangeID splits a record's ChangeID into its request's part and
// the change's index (liveJob.change).
func splitChangeID(id string) (changes string, change int32) {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		if n, err := strconv.ParseInt(id[i+1:], 10, 32); err == nil && n >= 0 && strconv.FormatInt(n, 10) == id[i+1:] {
			return id[:i], int32(n)
		}
	}
	return id, -1
}

// origins shares equal origins between the jobs of a view (one per change
// request instead of one per job). Its zero value is ready to use.
type origins map[origin]*origin

func (o *origins) get(v origin) *origin {
	if p, ok := (*o)[v]; ok {
		return p
	}
	if *o == nil {
		*o = origins{}
	}
	p := &v
	(*o)[v] = p
	return p
}

// newLiveJob returns the view's entry for rec, whose spec validated into j;
// o shares its origin with the other entries.
func newLiveJob(rec *specs.Record, j *schedule.Job, o *origins) *liveJob {
	changes, change := splitChangeID(rec.ChangeID)
	l := &liveJob{job: j, version: rec.Version, paused: rec.Paused, change: change, fileHash: newFileHash(rec.FileHash),
		origin: o.get(origin{setBy: rec.SetBy, source: rec.Source, note: rec.Note, setAt: rec.SetAt, effectiveFrom: rec.EffectiveFrom, changes: changes})}
	if s := j.ToSpec(); !reflect.DeepEqual(s, rec.Spec) {
		raw := rec.Spec
		l.raw = &raw
	}
	return l
}

// spec returns the job's spec exactly as its record holds it.
func (l *liveJob) spec() schedule.Spec {
	if l.raw != nil {
		return *l.raw
	}
	return l.job.ToSpec()
}

// record rebuilds the job's record of namespace, equal to the one read or
// written (with V set, as SpecRecord and a read leave it).
func (l *liveJob) record(namespace string) *specs.Record {
	return &specs.Record{V: specs.Version, Namespace: namespace, Job: l.job.Name, Version: l.version, Spec: l.spec(),
		Paused: l.paused, SetBy: l.origin.setBy, Source: l.origin.source, Note: l.origin.note, SetAt: l.origin.setAt,
		ChangeID: l.changeID(), EffectiveFrom: l.origin.effectiveFrom, FileHash: l.fileHash.String()}
}

// changeID returns the record's ChangeID.
func (l *liveJob) changeID() string {
	if l.change < 0 {
		return l.origin.changes
	}
	return l.origin.changes + "/" + strconv.Itoa(int(l.change))
}

// active reports whether the job publishes windows: enabled, not paused.
func (l *liveJob) active() bool { return l != nil && l.job.Enabled && l.paused == nil }
