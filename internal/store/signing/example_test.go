package signing_test

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/signing"
)

// The producer signs with the current key; workers accept the current and
// the previous key while the rotation rolls out.
func Example() {
	prev := signing.Key{ID: "2026-10", Secret: []byte("previous-secret-of-at-least-32-bytes!")}
	cur := signing.Key{ID: "2026-11", Secret: []byte("current-secret-of-at-least-32-bytes!!")}

	signer, err := signing.NewSigner(cur)
	if err != nil {
		panic(err)
	}
	verifier, err := signing.NewVerifier(true, prev, cur)
	if err != nil {
		panic(err)
	}

	rec := &kgo.Record{Topic: "kjob.windows", Key: []byte("report"), Value: []byte(`{"v":1}`)}
	if err := signer.Sign(rec); err != nil {
		panic(err)
	}
	fmt.Println("signed:", verifier.Verify(rec))

	rec.Value = []byte(`{"v":1,"payload":{"evil":true}}`)
	fmt.Println("altered:", verifier.Verify(rec))

	fmt.Println("unsigned:", verifier.Verify(&kgo.Record{Topic: "kjob.windows", Value: []byte(`{}`)}))
	// Output:
	// signed: <nil>
	// altered: signing: bad signature under key "2026-11": the record was altered or signed with another secret
	// unsigned: signing: record is not signed (headers kjob-signature-key and kjob-signature missing) and signatures are required
}
