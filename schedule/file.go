package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/kjob/kjob/internal/store/jobmsg"

	// Embed the time zone database so that a schedule means the same on a
	// host (or container image) without /usr/share/zoneinfo. The host's
	// database is still preferred when present.
	_ "time/tzdata"
)

// File is a parsed schedules file.
type File struct {
	// Path is the file's path as given to Parse or Load.
	Path string
	// Jobs are the file's jobs in file order; job names are unique.
	Jobs []*Job
}

// Load reads and parses a schedules file. A file that cannot be read is
// reported as such; problems with its contents as by Parse.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("schedules file: %w", err)
	}
	return Parse(path, data)
}

// Parse parses and validates the contents of a schedules file; path is used
// only in errors and in File.Path and Job.File.
//
// It reports every problem it finds, not just the first: the error is an
// errors.Join of *ValidationError values in line order, each naming file,
// line, field, value and fix. A file with any problem yields no File.
//
// YAML anchors, aliases and merge keys ("<<: *defaults") may be used to
// share settings between jobs; a key given explicitly wins over a merged
// one. Top-level keys starting with "x-" are ignored, so that they can hold
// such anchors:
//
//	x-defaults: &defaults {handler: http, timeout: 30s}
//	jobs:
//	  - name: report
//	    schedule: "@daily"
//	    <<: *defaults
//
// A large file is decoded a thousand jobs at a time (see parseChunked), so
// memory while parsing stays close to that of the parsed jobs, not of the
// whole YAML tree; the result and every error are the same as decoding it
// whole.
func Parse(path string, data []byte) (*File, error) {
	if f, err, ok := parseChunked(path, data, chunkJobs); ok {
		return f, err
	}
	return parseWhole(path, data)
}

// parseWhole parses data as one YAML tree.
func parseWhole(path string, data []byte) (*File, error) {
	p := &fileParser{path: path}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, &ValidationError{File: path, Line: 1, Field: "jobs", Msg: `file is empty; want a top-level "jobs:" list`}
	case err != nil:
		return nil, yamlError(path, data, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlError(path, data, err)
	default:
		return nil, &ValidationError{File: path, Line: extra.Line, Msg: "a second YAML document (after \"---\"); put all jobs in one \"jobs:\" list"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &ValidationError{File: path, Line: 1, Field: "jobs", Msg: `file is empty; want a top-level "jobs:" list`}
	}
	root := resolve(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return nil, &ValidationError{File: path, Line: root.Line, Msg: `want a mapping with a top-level "jobs:" list`}
	}
	jobsNode := p.topLevel(root)
	f := &File{Path: path}
	switch {
	case jobsNode == nil:
		p.fail(root, "jobs", "", `missing; want a top-level "jobs:" list`)
	case isNull(jobsNode) || jobsNode.Kind == yaml.SequenceNode && len(jobsNode.Content) == 0:
		p.fail(jobsNode, "jobs", "", "empty; define at least one job")
	case jobsNode.Kind != yaml.SequenceNode:
		p.fail(jobsNode, "jobs", "", `want a list of jobs, each starting with "- name: ..."`)
	default:
		seen := map[string]firstJob{}
		for i, n := range jobsNode.Content {
			p.addJob(f, seen, i, n)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.joined()
	}
	return f, nil
}

// joined returns the problems found, in file order, as an editor shows
// them (checks run per node, and top-level keys are checked before the
// jobs).
func (p *fileParser) joined() error {
	slices.SortStableFunc(p.errs, func(a, b error) int {
		return a.(*ValidationError).Line - b.(*ValidationError).Line
	})
	return errors.Join(p.errs...)
}

// topLevel checks the keys of the file's root mapping and returns the
// value of "jobs" (nil if absent).
func (p *fileParser) topLevel(root *yaml.Node) (jobsNode *yaml.Node) {
	for _, e := range p.mapping(root, "") {
		switch {
		case e.key.Value == "jobs":
			jobsNode = e.val
		case strings.HasPrefix(e.key.Value, "x-"):
			// Extension keys hold anchors for merge keys; ignored.
		default:
			p.fail(e.key, e.key.Value, "", `unknown top-level key; valid keys: jobs, and x-... keys to hold YAML anchors`)
		}
	}
	return jobsNode
}

// firstJob is where a job name was first seen.
type firstJob struct{ line, index int }

// addJob validates jobs[i] (node n) and adds it to f, reporting a name
// seen before.
func (p *fileParser) addJob(f *File, seen map[string]firstJob, i int, n *yaml.Node) {
	j, nameNode := p.job(i, resolve(n))
	if nameNode == nil {
		return
	}
	if prev, dup := seen[j.Name]; dup {
		p.fail(nameNode, fmt.Sprintf("jobs[%d].name", i), j.Name,
			fmt.Sprintf("duplicate job name: jobs[%d] at line %d has it too; job names must be unique", prev.index, prev.line))
	} else {
		seen[j.Name] = firstJob{nameNode.Line, i}
	}
	f.Jobs = append(f.Jobs, j)
}

// chunkJobs is how many jobs Parse decodes at a time.
const chunkJobs = 1000

// jobsLineRE matches the line that opens the jobs list in a file
// parseChunked can split.
var jobsLineRE = regexp.MustCompile(`^jobs:[ \t]*(#.*)?\r?$`)

// Kept (issue 24, docs/performance.md "Fast paths (issue 24)"), measured
// on 2026-11-28 on the shared 2-vCPU machine, embedded broker (kfake),
// load average 5-9, alternated 3 rounds with parseWhole alone: the
// 100k-schedules producer's peak RSS 333-338 MiB against 377-384 MiB
// without it, start-up to leading 2.5-2.8 s against 3.7-4.8 s;
// BenchmarkParse (100,000 jobs) 3.3-3.9 s against 3.5-5.7 s (440 against
// 412 MB allocated in all, 8.1 million allocations either way: the gain is
// the peak, not the work). The row misses its target (<= 200 MB) without
// it, so it stays. Again on a quiet machine (load 0.8-1.4, 2026-11-28
// 17:23, with the shared schedules and the producer's GOGC 50): peak RSS
// 154.9 / 156.5 / 157.9 MiB against 335.9 / 335.4 / 314.9 MiB without it,
// start-up to leading 1.6-2.2 s against 3.5-3.8 s.
//
// parseChunked parses a file of the usual shape without building its
// whole YAML tree: yaml.v3 can only decode a document whole, and the tree
// of 100,000 jobs takes a few hundred MB while the jobs take a tenth of
// that. The usual shape is: comments, blank lines and top-level x-...
// keys (holding anchors), then a line "jobs:", then the list in block
// style up to the end of the file. Each chunk of per items is
// decoded as the file's lines before the list plus the chunk's lines, so
// anchors of the x-... keys resolve in every chunk; line numbers are
// shifted back to the file's. ok is false, and the caller must parse the
// file whole, if the file has another shape, if an item defines an anchor
// (a later chunk could not see it), or if a chunk does not decode (so a
// YAML error is reported as for the whole file).
func parseChunked(path string, data []byte, per int) (f *File, err error, ok bool) {
	// Line starts, with a sentinel start one past the end.
	var starts []int
	for i := 0; i < len(data); {
		starts = append(starts, i)
		nl := bytes.IndexByte(data[i:], '\n')
		if nl < 0 {
			break
		}
		i += nl + 1
	}
	starts = append(starts, len(data))
	nlines := len(starts) - 1
	line := func(k int) []byte { return bytes.TrimSuffix(data[starts[k-1]:starts[k]], []byte("\n")) } // 1-based
	blank := func(l []byte) bool {
		t := bytes.TrimLeft(l, " ")
		return len(bytes.TrimSpace(t)) == 0 || t[0] == '#'
	}
	// The header: up to and including the "jobs:" line.
	jl := 0
	for k := 1; k <= nlines && jl == 0; k++ {
		l := line(k)
		switch {
		case blank(l) || l[0] == ' ' || bytes.HasPrefix(l, []byte("x-")):
		case jobsLineRE.Match(l):
			jl = k
		default:
			return nil, nil, false
		}
	}
	if jl == 0 {
		return nil, nil, false
	}
	// The items: lines starting with "-" at the list's indentation.
	var items []int // first line of each item
	indent := -1
	for k := jl + 1; k <= nlines; k++ {
		l := line(k)
		if blank(l) {
			continue
		}
		ind := len(l) - len(bytes.TrimLeft(l, " "))
		if l[ind] == '\t' {
			return nil, nil, false
		}
		if indent < 0 {
			indent = ind
		}
		switch {
		case ind < indent:
			return nil, nil, false
		case ind == indent:
			if l[ind] != '-' || ind+1 < len(l) && l[ind+1] != ' ' && l[ind+1] != '\r' {
				return nil, nil, false
			}
			items = append(items, k)
		}
	}
	if len(items) == 0 {
		return nil, nil, false
	}

	p := &fileParser{path: path, header: jl, headerMaps: map[[2]int]bool{}}
	f = &File{Path: path}
	seen := map[string]firstJob{}
	var chunk []byte
	for c := 0; c*per < len(items); c++ {
		first, last := c*per, min((c+1)*per, len(items))-1
		from, to := items[first], nlines // lines of the chunk
		if c == 0 {
			from = jl + 1
		}
		if last+1 < len(items) {
			to = items[last+1] - 1
		}
		chunk = append(append(chunk[:0], data[:starts[jl]]...), data[starts[from-1]:starts[to]]...)
		var doc yaml.Node
		if err := yaml.NewDecoder(bytes.NewReader(chunk)).Decode(&doc); err != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
			return nil, nil, false
		}
		root := resolve(doc.Content[0])
		if root.Kind != yaml.MappingNode || len(root.Content) < 2 {
			return nil, nil, false
		}
		key, list := root.Content[len(root.Content)-2], root.Content[len(root.Content)-1]
		if key.Value != "jobs" || key.Line != jl || list.Kind != yaml.SequenceNode || len(list.Content) != last-first+1 {
			return nil, nil, false
		}
		shift := from - (jl + 1)
		for _, n := range list.Content {
			if !shiftLines(n, shift) {
				return nil, nil, false
			}
		}
		if c == 0 && p.topLevel(root) != list {
			return nil, nil, false
		}
		for k, n := range list.Content {
			p.addJob(f, seen, first+k, n)
		}
		p.maps, p.busy = nil, nil // drop this chunk's tree
	}
	if len(p.errs) > 0 {
		return nil, p.joined(), true
	}
	return f, nil, true
}

// shiftLines adds shift to the line of n and of every node it contains
// (not through aliases, which point into the header). It reports false
// if a node defines an anchor.
func shiftLines(n *yaml.Node, shift int) bool {
	if n.Anchor != "" {
		return false
	}
	n.Line += shift
	for _, c := range n.Content {
		if !shiftLines(c, shift) {
			return false
		}
	}
	return true
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a YAML syntax error into a *ValidationError. A tab in the
// indentation of the line the parser names (or the next: it may name the
// line before) gets a hint, at the tab's line: YAML indents with spaces
// only, and the parser's own message does not say so.
func yamlError(path string, data []byte, err error) error {
	msg := err.Error()
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	if line > 0 {
		lines := bytes.Split(data, []byte("\n"))
		for _, l := range []int{line, line + 1} {
			if l <= len(lines) {
				indent := lines[l-1][:len(lines[l-1])-len(bytes.TrimLeft(lines[l-1], " \t"))]
				if bytes.IndexByte(indent, '\t') >= 0 {
					line = l
					msg += "; this line is indented with a tab character: YAML indentation must be spaces (replace the tab with spaces)"
					break
				}
			}
		}
	}
	return &ValidationError{File: path, Line: line, Msg: "invalid YAML: " + msg}
}

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	handlerRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?$`)
)

var (
	jobKeys   = []string{"name", "schedule", "at", "start", "end", "jitter", "timezone", "handler", "payload", "timeout", "catchup", "retries", "overlap", "max_concurrent", "enabled"}
	retryKeys = []string{"max_attempts", "backoff", "max_backoff"}
)

// overlapHelp lists the overlap policies for an error message.
const overlapHelp = `want one of queue (the default: one window at a time, in order), skip (do not run a window while the previous one runs), ` +
	`latest (keep only the newest waiting window), replace (cancel the running window for the newer one), allow (run windows concurrently)`

const specHelp = `want 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, ` +
	`or one of @every D, @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually`

// fileParser collects the problems of one file.
type fileParser struct {
	path string
	errs []error
	maps map[*yaml.Node][]entry // expanded mappings
	busy map[*yaml.Node]bool    // mappings being expanded

	// In parseChunked: the line of "jobs:" (nodes up to it are the
	// header, decoded again with every chunk), and the header mappings
	// expanded in an earlier chunk (by line and column), whose problems
	// were reported then, as parseWhole reports them once.
	header     int
	headerMaps map[[2]int]bool
	mute       int // > 0: fail reports nothing

	// bare: a Spec validated alone (Spec.Job), whose fields are named
	// "timezone", not "jobs[0].timezone".
	bare bool

	// One copy per file of each distinct handler, zone and spec string,
	// and one parsed schedule per distinct spec and zone (see shared).
	strs   map[string]string
	scheds map[schedKey]Schedule
}

type schedKey struct {
	spec string
	loc  *time.Location
}

// shared returns s, or an equal string an earlier job of the file holds.
// The jobs of a file repeat a few handlers, zones and specs, and a
// producer keeps its file's jobs for as long as it runs: at 100,000 jobs
// one copy per job was several MB of the row "100k schedules: producer
// RSS" (docs/performance.md). A Spec validated alone (bare) has nothing
// to share with.
func (p *fileParser) shared(s string) string {
	if p.bare {
		return s
	}
	if c, ok := p.strs[s]; ok {
		return c
	}
	if p.strs == nil {
		p.strs = map[string]string{}
	}
	p.strs[s] = s
	return s
}

// parseSpec is ParseSpec, once per distinct spec and zone of a file: a
// Schedule is immutable, so the jobs that share a spec share its parse
// (one per job was 3.5-5 MB of the 100k-schedules row's heap).
func (p *fileParser) parseSpec(spec string, loc *time.Location) (Schedule, error) {
	if p.bare {
		return ParseSpec(spec, loc)
	}
	k := schedKey{spec, loc}
	if s, ok := p.scheds[k]; ok {
		return s, nil
	}
	s, err := ParseSpec(spec, loc)
	if err != nil {
		return nil, err
	}
	if p.scheds == nil {
		p.scheds = map[schedKey]Schedule{}
	}
	p.scheds[k] = s
	return s, nil
}

// instant parses a time of at, start or end: RFC 3339 with an offset, or
// a local date and time read in loc (a wall time skipped by a
// spring-forward transition means the instant the gap ends, a repeated
// one its first occurrence, as for cron specs).
func (p *fileParser) instant(v *yaml.Node, field, s string, loc *time.Location) (time.Time, bool) {
	t, err := parseInstant(s, loc)
	if err != nil {
		p.fail(v, field, s, `want a time such as "2026-12-01T08:00:00" (read in the job's timezone) or "2026-12-01T08:00:00+01:00" (RFC 3339 with an offset)`)
		return time.Time{}, false
	}
	return t, true
}

// location returns the time zone name (loadZone).
func (p *fileParser) location(name string) (*time.Location, error) { return loadZone(name) }

// zones holds the time zones this process has loaded, by name. Every
// time.LoadLocation reads and parses the zone's file anew, and a job holds
// its zone for as long as it lives: a producer that validates specs one at
// a time (Spec.Job: each job of an apply through the API, each spec a
// leader reads from the schedules topic) held one copy per job, 183 MB of
// its 547 MiB after an apply of 100,000 jobs in three zones
// (docs/performance.md, "apply 100k new jobs"), and spent a quarter of
// the apply's CPU reading zone files. A *time.Location is immutable and
// safe for concurrent use, so one copy per zone serves every job. Only
// zones that loaded are kept, so the map is bounded by the system's zone
// database.
var zones sync.Map // string -> *time.Location

// loadZone is time.LoadLocation, once per zone name and process.
func loadZone(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	actual, _ := zones.LoadOrStore(name, loc)
	return actual.(*time.Location), nil
}

func (p *fileParser) fail(n *yaml.Node, field, value, msg string) {
	if p.mute > 0 {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errs = append(p.errs, &ValidationError{File: p.path, Line: line, Field: field, Value: value, Msg: msg})
}

// job validates jobs[i]. nameNode is nil if the job has no usable name (it
// is then left out of the duplicate check).
func (p *fileParser) job(i int, n *yaml.Node) (j *Job, nameNode *yaml.Node) {
	// Fields are named jobs[i].key in a file, and just key for a Spec
	// validated alone (bare).
	self := fmt.Sprintf("jobs[%d]", i)
	at := func(k string) string { return self + "." + k }
	if p.bare {
		self = ""
		at = func(k string) string { return k }
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n, self, scalarValue(n), "want a mapping with name, schedule, handler, ...")
		return nil, nil
	}
	j = &Job{
		File: p.path, Line: n.Line, Location: time.UTC,
		Payload: json.RawMessage("{}"), Timeout: DefaultTimeout, Enabled: true, Overlap: OverlapQueue,
		Retries: RetryPolicy{MaxAttempts: DefaultMaxAttempts, Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff},
	}
	fields := map[string]*yaml.Node{}
	for _, e := range p.mapping(n, self) {
		if !slices.Contains(jobKeys, e.key.Value) {
			p.fail(e.key, at(e.key.Value), "", "unknown key; valid keys: "+strings.Join(jobKeys, ", "))
			continue
		}
		fields[e.key.Value] = e.val
	}
	// scalar returns a field's value; ok is false if it is absent or null
	// (which counts as absent), or not a single value (reported).
	scalar := func(k string) (s string, v *yaml.Node, ok bool) {
		v = fields[k]
		if v == nil || isNull(v) {
			return "", v, false
		}
		if v.Kind != yaml.ScalarNode {
			p.fail(v, at(k), "", "want a single value, not a "+kindName(v))
			return "", v, false
		}
		return v.Value, v, true
	}
	// missing reports a required field that is absent, null or "".
	missing := func(k string) bool {
		v := fields[k]
		return v == nil || isNull(v) || v.Kind == yaml.ScalarNode && strings.TrimSpace(v.Value) == ""
	}

	if s, v, ok := scalar("name"); ok && !missing("name") {
		if msg := nameProblem(s); msg == "" {
			j.Name, nameNode = s, v
		} else {
			p.fail(v, at("name"), s, msg)
		}
	} else if missing("name") {
		p.fail(n, at("name"), "", nameRequired)
	}

	if s, v, ok := scalar("handler"); ok && !missing("handler") {
		if handlerRE.MatchString(s) {
			j.Handler = p.shared(s)
		} else {
			p.fail(v, at("handler"), s, "want lower-case letters, digits, '-', '.' and '_', at most 128 characters, starting and ending with a letter or digit")
		}
	} else if missing("handler") {
		p.fail(n, at("handler"), "", "required: the name of a handler registered in the worker, such as \"http\"")
	}

	if s, v, ok := scalar("timezone"); ok && s != "" {
		switch loc, err := p.location(s); {
		case strings.EqualFold(s, "local"):
			p.fail(v, at("timezone"), s, `the machine's local zone differs between machines; use an IANA name such as "Europe/Berlin", or leave timezone out for UTC`)
		case err != nil:
			p.fail(v, at("timezone"), s, `unknown time zone; use an IANA name such as "Europe/Berlin"`)
		default:
			j.Timezone, j.Location = p.shared(s), loc
		}
	}

	hasSchedule, hasAt := !missing("schedule"), !missing("at")
	switch {
	case hasSchedule && hasAt:
		p.fail(fields["at"], at("at"), scalarValue(fields["at"]), "a job has either schedule (recurring) or at (once), not both; remove one")
	case !hasSchedule && hasAt:
		if s, v, ok := scalar("at"); ok {
			if t, okt := p.instant(v, at("at"), s, j.Location); okt {
				j.At = t
			}
		}
		for _, k := range []string{"start", "end"} {
			if !missing(k) {
				p.fail(fields[k], at(k), scalarValue(fields[k]), "bounds a recurring schedule; a job with at runs once at that instant: remove "+k)
			}
		}
	}
	if hasAt {
		// at replaces schedule; start and end were checked above.
	} else if s, v, ok := scalar("schedule"); ok && !missing("schedule") {
		// The spec is checked in UTC if the timezone is bad: the
		// timezone's own error says what to fix.
		if sch, err := p.parseSpec(s, j.Location); err != nil {
			msg := err.Error()
			if !strings.HasPrefix(strings.TrimSpace(s), "@every") {
				msg += "; " + specHelp
			}
			p.fail(v, at("schedule"), s, msg)
		} else {
			j.Spec, j.sched = p.shared(s), sch
		}
	} else if missing("schedule") {
		p.fail(n, at("schedule"), "", `required: a cron spec such as "30 2 * * *", "*/10 * * * * *" or "@every 1m", or at: an instant such as "2026-12-01T08:00:00" for a job that runs once`)
	}
	if !hasAt {
		var startNode *yaml.Node
		if s, v, ok := scalar("start"); ok && !missing("start") {
			if t, okt := p.instant(v, at("start"), s, j.Location); okt {
				j.Start, startNode = t, v
			}
		}
		if s, v, ok := scalar("end"); ok && !missing("end") {
			if t, okt := p.instant(v, at("end"), s, j.Location); okt {
				if startNode != nil && t.Before(j.Start) {
					p.fail(v, at("end"), s, fmt.Sprintf("is before start (%s); no window could run: move end after start or remove one", startNode.Value))
				} else {
					j.End = t
				}
			}
		}
	}
	if s, v, ok := scalar("jitter"); ok {
		if d, okd := p.duration(v, at("jitter"), s); okd {
			switch {
			case d < 0:
				p.fail(v, at("jitter"), s, `must not be negative (0 means no jitter); use a duration such as "30s"`)
			case d > MaxJitter:
				p.fail(v, at("jitter"), s, fmt.Sprintf("must be at most %v: jitter delays each window's publication by up to this much", MaxJitter))
			default:
				j.Jitter = d
			}
		}
	}

	if s, v, ok := scalar("timeout"); ok {
		if d, okd := p.duration(v, at("timeout"), s); okd {
			switch {
			case d <= 0:
				p.fail(v, at("timeout"), s, "must be positive: it bounds each attempt")
			case d > jobmsg.MaxTimeout:
				p.fail(v, at("timeout"), s, fmt.Sprintf("must be at most %v (workers refuse a longer timeout); a handler that needs longer should start the work asynchronously and return", jobmsg.MaxTimeout))
			default:
				j.Timeout = d
			}
		}
	}
	if s, v, ok := scalar("catchup"); ok {
		if d, okd := p.duration(v, at("catchup"), s); okd {
			if d < 0 {
				p.fail(v, at("catchup"), s, "must not be negative (0 means never catch up)")
			} else {
				j.Catchup = d
			}
		}
	}
	if s, v, ok := scalar("overlap"); ok {
		if o := Overlap(s); o.Valid() {
			j.Overlap = o
		} else {
			p.fail(v, at("overlap"), s, overlapHelp)
		}
	}
	if s, v, ok := scalar("max_concurrent"); ok {
		switch n, err := strconv.Atoi(s); {
		case err != nil || n < 1 || n > jobmsg.MaxConcurrentLimit:
			p.fail(v, at("max_concurrent"), s, fmt.Sprintf("want a whole number from 1 to %d: how many windows of the job one worker runs at once (leave it out for the worker's default)", jobmsg.MaxConcurrentLimit))
		case j.Overlap != OverlapAllow:
			p.fail(v, at("max_concurrent"), s, fmt.Sprintf("applies only to overlap: allow (overlap %s runs one window of the job at a time); set overlap: allow or remove max_concurrent", j.Overlap))
		default:
			j.MaxConcurrent = n
		}
	}
	if s, v, ok := scalar("enabled"); ok {
		if b, okb := boolValue(v); okb {
			j.Enabled = b
		} else {
			p.fail(v, at("enabled"), s, "want true or false")
		}
	}
	if v := fields["payload"]; v != nil && !isNull(v) {
		if v.Kind != yaml.MappingNode {
			p.fail(v, at("payload"), scalarValue(v), "want a mapping such as {url: \"http://...\"}: the handler gets it as a JSON object")
		} else if b, ok := p.payload(v, at("payload")); ok {
			j.Payload = b
		}
	}
	if v := fields["retries"]; v != nil && !isNull(v) {
		p.retries(v, at("retries"), &j.Retries)
	}
	return j, nameNode
}

// duration parses a Go duration string, reporting a malformed one.
func (p *fileParser) duration(v *yaml.Node, field, s string) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	if err != nil {
		p.fail(v, field, s, `want a duration such as "30s", "5m" or "1h30m"`)
		return 0, false
	}
	return d, true
}

func (p *fileParser) retries(n *yaml.Node, at string, r *RetryPolicy) {
	if n.Kind != yaml.MappingNode {
		p.fail(n, at, scalarValue(n), "want a mapping such as {max_attempts: 5, backoff: 2s, max_backoff: 1m}")
		return
	}
	var backoffNode *yaml.Node
	bad := false
	for _, e := range p.mapping(n, at) {
		field := at + "." + e.key.Value
		v := e.val
		if !slices.Contains(retryKeys, e.key.Value) {
			p.fail(e.key, field, "", "unknown key; valid keys: "+strings.Join(retryKeys, ", "))
			continue
		}
		if v.Kind != yaml.ScalarNode {
			p.fail(v, field, "", "want a single value, not a "+kindName(v))
			bad = true
			continue
		}
		switch e.key.Value {
		case "max_attempts":
			a, err := strconv.Atoi(v.Value)
			if err != nil || a < 1 || a > jobmsg.MaxAttempts {
				p.fail(v, field, v.Value, fmt.Sprintf("want a whole number from 1 to %d", jobmsg.MaxAttempts))
				bad = true
				continue
			}
			r.MaxAttempts = a
		case "backoff", "max_backoff":
			d, ok := p.duration(v, field, v.Value)
			if !ok {
				bad = true
				continue
			}
			if d <= 0 {
				p.fail(v, field, v.Value, `must be positive, such as "1s"`)
				bad = true
				continue
			}
			if d > jobmsg.MaxBackoffLimit {
				p.fail(v, field, v.Value, fmt.Sprintf("must be at most %v (workers refuse a longer wait between attempts)", jobmsg.MaxBackoffLimit))
				bad = true
				continue
			}
			if e.key.Value == "backoff" {
				r.Backoff, backoffNode = d, v
			} else {
				r.MaxBackoff = d
			}
		}
	}
	if !bad && r.MaxBackoff < r.Backoff {
		line := n
		if backoffNode != nil {
			line = backoffNode
		}
		p.fail(line, at+".max_backoff", r.MaxBackoff.String(),
			fmt.Sprintf("must be at least backoff (%v); raise max_backoff or lower backoff", r.Backoff))
	}
}

// entry is one key of a mapping.
type entry struct{ key, val *yaml.Node }

// maxDepth bounds the nesting of payloads (YAML aliases can form cycles).
const maxDepth = 32

// mapping returns the entries of the mapping node n in order, with merge
// keys ("<<: *defaults") expanded: explicit keys win over merged ones, and
// of several merged mappings the first wins, as YAML specifies. A key given
// twice is reported; aliases are resolved.
//
// Each mapping node is expanded once and the result reused, so that merges
// of merges cannot blow up; a merge that refers back to itself is reported.
func (p *fileParser) mapping(n *yaml.Node, at string) []entry {
	if es, done := p.maps[n]; done {
		return es
	}
	if p.header > 0 && n.Line <= p.header {
		pos := [2]int{n.Line, n.Column}
		if p.headerMaps[pos] {
			p.mute++
			defer func() { p.mute-- }()
		}
		p.headerMaps[pos] = true
	}
	if p.busy[n] {
		p.fail(n, at, "", "a merge key refers back to its own mapping")
		return nil
	}
	if p.maps == nil {
		p.maps, p.busy = map[*yaml.Node][]entry{}, map[*yaml.Node]bool{}
	}
	p.busy[n] = true
	defer delete(p.busy, n)
	es := p.expand(n, at)
	p.maps[n] = es
	return es
}

func (p *fileParser) expand(n *yaml.Node, at string) []entry {
	field := func(k string) string {
		if at == "" {
			return k
		}
		return at + "." + k
	}
	var out []entry
	seen := map[string]*yaml.Node{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if isMergeKey(k) {
			merges = append(merges, v)
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			msg := fmt.Sprintf("key given twice (first at line %d); remove one", prev.Line)
			if prev.Line == 0 { // a Spec's payload has no lines
				msg = "key given twice; remove one"
			}
			p.fail(k, field(k.Value), "", msg)
			continue
		}
		seen[k.Value] = k
		out = append(out, entry{k, v})
	}
	var sources []*yaml.Node
	for _, m := range merges {
		if m.Kind == yaml.SequenceNode {
			for _, s := range m.Content {
				sources = append(sources, resolve(s))
			}
		} else {
			sources = append(sources, m)
		}
	}
	for _, s := range sources {
		if s.Kind != yaml.MappingNode {
			p.fail(s, field("<<"), scalarValue(s), "a merge key takes a mapping or a list of mappings, such as <<: *defaults")
			continue
		}
		for _, e := range p.mapping(s, at) {
			if _, dup := seen[e.key.Value]; !dup {
				seen[e.key.Value] = e.key
				out = append(out, e)
			}
		}
	}
	return out
}

// payload converts a YAML mapping to a JSON object, keeping its key order.
// A payload that grows too large is reported at n, the payload itself: the
// aliases that made it large may point at anchors anywhere in the file.
func (p *fileParser) payload(n *yaml.Node, at string) (json.RawMessage, bool) {
	var b bytes.Buffer
	if !p.toJSON(&b, n, at, at, 0) {
		if b.Len() > MaxPayloadBytes {
			p.fail(n, at, "", fmt.Sprintf("more than %d bytes as JSON; pass a reference to the data instead", MaxPayloadBytes))
		}
		return nil, false
	}
	if why := PayloadTooLarge(b.Len()); why != "" {
		p.fail(n, at, "", why)
		return nil, false
	}
	return json.RawMessage(b.Bytes()), true
}

func (p *fileParser) toJSON(b *bytes.Buffer, n *yaml.Node, root, at string, depth int) bool {
	n = resolve(n)
	if depth > maxDepth {
		p.fail(n, root, "", fmt.Sprintf("nested more than %d levels deep (does an alias refer to its own anchor?)", maxDepth))
		return false
	}
	if b.Len() > MaxPayloadBytes {
		return false // payload reports it, at the payload's line
	}
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i, e := range p.mapping(n, at) {
			if e.key.Kind != yaml.ScalarNode {
				p.fail(e.key, at, "", "JSON object keys must be plain values, not a "+kindName(e.key))
				return false
			}
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, e.key.Value)
			b.WriteByte(':')
			if !p.toJSON(b, e.val, root, at+"."+e.key.Value, depth+1) {
				return false
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if !p.toJSON(b, c, root, fmt.Sprintf("%s[%d]", at, i), depth+1) {
				return false
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			b.WriteString("null")
		case "!!bool":
			v, _ := boolValue(n)
			b.WriteString(strconv.FormatBool(v))
		case "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				p.fail(n, at, n.Value, "not a number: "+err.Error())
				return false
			}
			if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
				p.fail(n, at, n.Value, "JSON has no NaN or infinity; quote it to pass a string")
				return false
			}
			js, err := json.Marshal(v)
			if err != nil {
				p.fail(n, at, n.Value, "cannot be represented in JSON: "+err.Error())
				return false
			}
			b.Write(js)
		default: // strings, timestamps, binary, custom tags: as written
			writeJSONString(b, n.Value)
		}
	default:
		p.fail(n, at, "", "unsupported YAML node")
		return false
	}
	return true
}

// writeJSONString writes s as a JSON string without HTML escaping, so URLs
// with '&' stay readable.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // drop the newline Encode appends
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < maxDepth; i++ {
		n = n.Alias
	}
	return n
}

func isMergeKey(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "<<" && n.ShortTag() == "!!merge"
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// boolValue accepts YAML booleans (true, false, True, FALSE, ...), not
// strings such as "yes" or numbers.
func boolValue(n *yaml.Node) (v, ok bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		return false, false
	}
	if err := n.Decode(&v); err != nil {
		return false, false
	}
	return v, true
}

// scalarValue returns n's value for an error message, "" for collections.
func scalarValue(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return ""
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	default:
		return "value"
	}
}
