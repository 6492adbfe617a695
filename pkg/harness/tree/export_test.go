package tree

import "github.com/initorigin/io-harness-go/pkg/harness/policy"

// NewUnlockedLedger returns a ledger whose draws check what is left and
// reserve it in two steps, calling gap between them without the lock:
// the ledger with its protection switched off, for negative controls.
func NewUnlockedLedger(ceiling Amount, spent Amount, gap func()) *Ledger {
	l := NewLedger(ceiling, spent)
	l.gap = gap
	return l
}

// NarrowUncontained is Narrow with containment switched off: the child's
// policy is its own denies alone, as a naive spawn would store it.
func NarrowUncontained(parent *policy.Policy, d Deny) *policy.Policy {
	return narrow(parent, d, false)
}
