package dlq_test

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/dlq"
)

// A worker builds the letter of a record it cannot run; kjobctl reads it
// back. A value too large for a letter keeps a prefix, its size and hash.
func Example() {
	orig := &kgo.Record{Topic: "kjob.windows", Partition: 0, Offset: 57, Key: []byte("sync"), Value: make([]byte, 1_000_117)}
	letter := dlq.New("kjob.windows.dlq", orig, dlq.Meta{
		Reason: "undecodable record: jobmsg: value: 1000117 bytes: exceeds the limit of 262144 bytes",
		Worker: "worker-1",
		At:     time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC),
	})
	fmt.Println("fits:", dlq.Size(letter) <= dlq.MaxBytes)

	l, err := dlq.Parse(letter)
	if err != nil {
		panic(err)
	}
	fmt.Println("original:", l.Origin)
	fmt.Println("complete:", l.Complete())
	fmt.Println("missing:", l.Missing())
	fmt.Println("sha256:", l.ValueSHA256[:16]+"...")
	// Output:
	// fits: true
	// original: kjob.windows[0]@57
	// complete: false
	// missing: value cut to 65536 of 1000117 bytes
	// sha256: d1b6cecd8bd57a9f...
}
