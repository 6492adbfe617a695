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
