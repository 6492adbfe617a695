package watch

import (
	"encoding/json"
	"testing"
)

// FuzzOffer delivers arbitrary sequences of live and stored events: the
// follower never panics, never delivers a numbered event twice without a
// rewind, and never delivers one out of order.
func FuzzOffer(f *testing.F) {
	f.Add([]byte{1, 2, 3, 0, 5, 4}, []byte{1, 3})
	f.Add([]byte{9, 8, 7}, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Fuzz(func(t *testing.T, live, stored []byte) {
		var got []int64
		fl := &follower{ahead: map[int64]Item{}, fn: func(it Item) error {
			if it.Seq != 0 {
				got = append(got, it.Seq)
			}
			return nil
		}}
		for i := 0; i < len(live) || i < len(stored); i++ {
			if i < len(live) {
				fl.offer(Item{Seq: int64(live[i]), Data: json.RawMessage(`{}`), Live: true})
			}
			if i < len(stored) && int64(stored[i]) > fl.last {
				fl.deliver(Item{Seq: int64(stored[i])})
				fl.flushAhead()
			}
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("delivered %v", got)
			}
		}
	})
}
