package harness

import (
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/scripted"
)

func TestInputMeter(t *testing.T) {
	p, err := scripted.New(scripted.Script{Turns: []scripted.Turn{{Text: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := scripted.New(scripted.Script{Name: "other", Turns: []scripted.Turn{{Text: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(s string) provider.Message { return provider.Message{Role: provider.RoleUser, Content: s} }
	long := "the system prompt, which is long enough that its estimate is well above the provider's count of it"
	base := &provider.Request{System: long, Messages: []provider.Message{msg("first"), msg("second")}}
	const counted = 30 // what the provider said base held: less than its estimate
	est := func(r *provider.Request) int64 { return provider.EstimateInput(r) }
	part := func(m provider.Message) int64 { return provider.MessageTokens(&m) + provider.PerMessageTokens }
	for _, tc := range []struct {
		name string
		p    provider.Provider
		req  *provider.Request
		want int64
	}{
		{"the same request", p, base, counted},
		{"a message more", p, &provider.Request{System: long, Messages: []provider.Message{msg("first"), msg("second"), msg("third")}},
			counted + part(msg("third"))},
		{"a message fewer (a fold)", p, &provider.Request{System: long, Messages: []provider.Message{msg("second")}}, counted},
		{"the same message twice", p, &provider.Request{System: long, Messages: []provider.Message{msg("first"), msg("second"), msg("first")}},
			counted + part(msg("first"))},
		{"another system prompt", p, &provider.Request{System: "short", Messages: base.Messages},
			min(counted+provider.CountTextTokens("short"), est(&provider.Request{System: "short", Messages: base.Messages}))},
		{"another provider's count says nothing", other, base, est(base)},
	} {
		var m inputMeter
		m.read(p, base, provider.Usage{InputTokens: counted})
		if got := m.bound(tc.p, tc.req); got != tc.want {
			t.Errorf("%s: bound %d, want %d", tc.name, got, tc.want)
		}
	}
	// Where the estimate is lower than the count and what is new, it is
	// the bound; with no count, the estimate is.
	var m inputMeter
	if got := m.bound(p, base); got != est(base) {
		t.Errorf("no reading: bound %d, want the estimate %d", got, est(base))
	}
	m.read(p, base, provider.Usage{InputTokens: 100_000})
	if got := m.bound(p, base); got != est(base) {
		t.Errorf("a count above the estimate: bound %d, want the estimate %d", got, est(base))
	}
}
