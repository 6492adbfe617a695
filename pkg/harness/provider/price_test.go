package provider_test

import (
	"math"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

func TestPriceCost(t *testing.T) {
	sonnet := provider.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	tests := []struct {
		name string
		p    provider.Price
		u    provider.Usage
		usd  float64
	}{
		{"plain", sonnet, provider.Usage{InputTokens: 254, OutputTokens: 5}, 0.000762 + 0.000075},
		{"cache read and write are parts of input", sonnet, provider.Usage{InputTokens: 1000, CacheReadTokens: 600, CacheWriteTokens: 300, OutputTokens: 10}, (100*3 + 600*0.3 + 300*3.75 + 10*15) / 1e6},
		{"zero cache prices mean input", provider.Price{Input: 2, Output: 8}, provider.Usage{InputTokens: 10, CacheReadTokens: 4, CacheWriteTokens: 3}, 20.0 / 1e6},
		{"zero usage", sonnet, provider.Usage{}, 0},
	}
	for _, tt := range tests {
		got := tt.p.Cost(tt.u)
		if !got.Known || math.Abs(got.USD-tt.usd) > 1e-15 {
			t.Errorf("%s: Cost = %v, want $%g", tt.name, got, tt.usd)
		}
	}
}

func TestLongContextPrice(t *testing.T) {
	// gpt-5.4: a prompt past 272k tokens bills the whole request at the
	// long-context prices, output included.
	p := provider.Price{Input: 2.5, Output: 15, CacheRead: 0.25,
		LongContext: &provider.LongContextPrice{AboveInputTokens: 272_000, Input: 5, Output: 22.5, CacheRead: 0.5}}
	tests := []struct {
		name string
		u    provider.Usage
		usd  float64
	}{
		{"at the threshold", provider.Usage{InputTokens: 272_000, OutputTokens: 1000}, (272_000*2.5 + 1000*15) / 1e6},
		{"one past it", provider.Usage{InputTokens: 272_001, OutputTokens: 1000}, (272_001*5 + 1000*22.5) / 1e6},
		{"cache reads count towards it", provider.Usage{InputTokens: 300_000, CacheReadTokens: 290_000}, (10_000*5 + 290_000*0.5) / 1e6},
		{"zero long-context cache price means its input", provider.Usage{InputTokens: 300_000, CacheWriteTokens: 100_000}, 300_000 * 5 / 1e6},
	}
	for _, tt := range tests {
		got := p.Cost(tt.u)
		if !got.Known || math.Abs(got.USD-tt.usd) > 1e-12 {
			t.Errorf("%s: Cost = %v, want $%g", tt.name, got, tt.usd)
		}
	}
	if !p.Valid() || (provider.Price{Input: -1}).Valid() ||
		(provider.Price{LongContext: &provider.LongContextPrice{Input: 1}}).Valid() ||
		(provider.Price{LongContext: &provider.LongContextPrice{AboveInputTokens: 1, Output: -1}}).Valid() {
		t.Error("Valid is wrong")
	}
}

func TestOutputCap(t *testing.T) {
	sonnet := provider.Limits{ContextWindow: 200_000, MaxOutputTokens: 64_000}
	tests := []struct {
		name      string
		l         provider.Limits
		want, in  int64
		outputCap int64
	}{
		{"none asked: the model's maximum", sonnet, 0, 1000, 64_000},
		{"asked for less", sonnet, 4096, 1000, 4096},
		{"asked for more than the model takes", sonnet, 1_000_000, 1000, 64_000},
		{"the window leaves less room", sonnet, 0, 180_000, 20_000},
		{"no room left: the server says so", sonnet, 0, 250_000, 64_000},
		{"input unknown", sonnet, 0, 0, 64_000},
		{"limits unknown, none asked: send none", provider.Limits{}, 0, 1000, 0},
		{"limits unknown: what was asked", provider.Limits{}, 5000, 1000, 5000},
		{"only the window known", provider.Limits{ContextWindow: 8192}, 8192, 4000, 4192},
	}
	for _, tt := range tests {
		if got := tt.l.OutputCap(tt.want, tt.in); got != tt.outputCap {
			t.Errorf("%s: OutputCap(%d, %d) = %d, want %d", tt.name, tt.want, tt.in, got, tt.outputCap)
		}
	}
}
