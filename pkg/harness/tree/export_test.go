package tree

// NewUnlockedLedger returns a ledger whose draws check what is left and
// reserve it in two steps, calling gap between them without the lock:
// the ledger with its protection switched off, for negative controls.
func NewUnlockedLedger(ceiling Amount, spent Amount, gap func()) *Ledger {
	l := NewLedger(ceiling, spent)
	l.gap = gap
	return l
}
