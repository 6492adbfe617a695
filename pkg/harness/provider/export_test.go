package provider

// TrustEveryLetterPair switches off the letter-pair check of
// CountTextTokens, as if every two letters were a token, for a negative
// control; the returned func switches it back on.
func TrustEveryLetterPair() (restore func()) {
	saved := pairTokens
	for i := range pairTokens {
		pairTokens[i] = 1<<52 - 1
	}
	return func() { pairTokens = saved }
}

// PairTokens is the table CountTextTokens holds.
func PairTokens() [52]uint64 { return pairTokens }
