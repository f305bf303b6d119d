package signing

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// LoadKeys reads one key per regular file in dir: the file name is the key
// id, its content (trailing whitespace ignored) the secret. Names starting
// with '.' are skipped, so a mounted Kubernetes Secret (whose ..data entries
// are hidden) works as is. Keys are returned sorted by id.
func LoadKeys(dir string) ([]Key, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("signing: keys directory: %w", err)
	}
	var keys []Key
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		st, err := os.Stat(path) // follows the Secret's symlinks
		if err != nil {
			return nil, fmt.Errorf("signing: key %s: %w", path, err)
		}
		if !st.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("signing: key %s: %w", path, err)
		}
		k := Key{ID: e.Name(), Secret: []byte(strings.TrimRight(string(b), " \t\r\n"))}
		if err := k.validate(); err != nil {
			return nil, fmt.Errorf("%w (file %s)", err, path)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("signing: keys directory %s holds no key files; put one file per key, named by its id", dir)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ID < keys[j].ID })
	return keys, nil
}
