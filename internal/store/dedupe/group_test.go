package dedupe

import (
	"slices"
	"testing"

	"github.com/kjob/kjob/internal/base/names"
)

// group keeps each job's windows together, jobs in order of first
// appearance and windows in the order given, with the job's token key
// first when asked; merge of consecutive groups is their concatenation.
func TestGroupAndMerge(t *testing.T) {
	s := &Store{keyPrefix: names.Deployment{Namespace: "ns"}.JobKeyPrefix()}
	ids := []string{"a@1", "b@1", "a@2", "c@1", "b@2", "a@3"}
	key := func(id string) string { k, _, _ := s.key(id); return k }
	for _, withToken := range []bool{false, true} {
		groups, err := s.group(ids, withToken, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			job string
			idx []int
		}{{"a", []int{0, 2, 5}}, {"b", []int{1, 4}}, {"c", []int{3}}}
		if len(groups) != len(want) {
			t.Fatalf("withToken %v: %d groups, want %d", withToken, len(groups), len(want))
		}
		var allIdx []int
		var allKeys []string
		for g, w := range want {
			var keys []string
			if withToken {
				k, tag, _ := s.key(w.job + "@x")
				keys = append(keys, tokenKey(k, tag))
			}
			for _, i := range w.idx {
				keys = append(keys, key(ids[i]))
			}
			if !slices.Equal(groups[g].idx, w.idx) || !slices.Equal(groups[g].keys, keys) {
				t.Errorf("withToken %v: group %d = %v %v; want %v %v", withToken, g, groups[g].idx, groups[g].keys, w.idx, keys)
			}
			allIdx = append(allIdx, w.idx...)
			allKeys = append(allKeys, keys...)
		}
		m := merge(groups)
		if !slices.Equal(m.idx, allIdx) || !slices.Equal(m.keys, allKeys) || len(m.groups) != 3 {
			t.Errorf("withToken %v: merge = %v %v; want %v %v", withToken, m.idx, m.keys, allIdx, allKeys)
		}
		// Groups out of their layout's order are copied, not sliced.
		m = merge([]*batchGroup{groups[2], groups[0]})
		if !slices.Equal(m.idx, []int{3, 0, 2, 5}) || len(m.keys) != len(groups[2].keys)+len(groups[0].keys) || m.keys[len(groups[2].keys)-1] != key("c@1") {
			t.Errorf("withToken %v: merge of groups 2, 0 = %v %v", withToken, m.idx, m.keys)
		}
	}
	if _, err := s.group([]string{"a@1", "nojob"}, false, nil); err == nil {
		t.Error("group accepted an id without '@'")
	}
}
