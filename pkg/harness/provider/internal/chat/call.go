package chat

import (
	"context"

	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wire"
)

// Do sends r and decodes the streamed turn. Every error is a
// *provider.Error.
func Do(ctx context.Context, r *wire.Request, onText func(string)) (*Turn, error) {
	s, err := wire.Open(ctx, r)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	t, err := Decode(s, onText)
	if err != nil {
		return nil, s.Fail(err)
	}
	return t, nil
}
