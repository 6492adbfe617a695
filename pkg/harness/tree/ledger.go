package tree

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Amount is a quantity of spend: tokens and money.
type Amount struct {
	Tokens int64   `json:"tokens"`
	USD    float64 `json:"usd"`
}

// Add returns a+b.
func (a Amount) Add(b Amount) Amount { return Amount{Tokens: a.Tokens + b.Tokens, USD: a.USD + b.USD} }

// Sub returns a-b.
func (a Amount) Sub(b Amount) Amount { return Amount{Tokens: a.Tokens - b.Tokens, USD: a.USD - b.USD} }

// ErrCeiling reports a draw the ledger's ceiling cannot pay for, even once
// every draw in flight has settled: the tree is halted.
var ErrCeiling = errors.New("tree: the spend ceiling is reached")

// Ledger is the one account a tree's agents draw their spend from. A draw
// is reserved before a provider call, under the ledger's lock, and
// settled with what the call really cost; the ceiling holds across every
// agent at once, because what is reserved is never lent twice.
//
// A zero field of the ceiling does not cap that quantity.
type Ledger struct {
	ceiling Amount

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when spent or reserved falls
	spent    Amount
	reserved Amount
	halted   string // why the tree halted; empty while it runs

	// gap, when set, switches the lock around a draw's check and its
	// reservation off: Reserve lets go of the lock between the two and
	// calls gap there. Only the negative control of the tests sets it
	// (export_test.go).
	gap func()
}

// NewLedger returns a ledger with ceiling, on which spent is already
// drawn (a resumed tree's durable totals).
func NewLedger(ceiling Amount, spent Amount) *Ledger {
	return &Ledger{ceiling: ceiling, spent: spent, changed: make(chan struct{})}
}

// Ceiling returns the ledger's ceiling.
func (l *Ledger) Ceiling() Amount { return l.ceiling }

// Spent returns what the tree has spent, not counting draws in flight.
func (l *Ledger) Spent() Amount {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spent
}

// Left returns what the ceiling leaves after what is spent, not counting
// draws in flight; a quantity the ceiling does not cap is very large.
func (l *Ledger) Left() Amount {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.left(Amount{})
}

// Draw is a reservation on a Ledger, to be settled once.
type Draw struct {
	l       *Ledger
	amount  Amount
	settled bool
}

// Amount is what the draw reserved.
func (d *Draw) Amount() Amount { return d.amount }

// Plan decides a draw: given what the ledger can lend now, it returns
// what to reserve and true, or false when that is too little.
type Plan func(avail Amount) (Amount, bool)

// Reserve reserves what plan decides on what is left: the ceiling less
// what is spent and what other draws hold. When plan finds that too
// little but would accept what is left once every draw in flight has
// settled, Reserve waits for draws to settle; when it would not accept
// even that, the ledger halts and Reserve returns an error wrapping
// ErrCeiling. A halted ledger refuses every draw.
func (l *Ledger) Reserve(ctx context.Context, plan Plan) (*Draw, error) {
	for {
		l.mu.Lock()
		if l.halted != "" {
			l.mu.Unlock()
			return nil, fmt.Errorf("%w: %s", ErrCeiling, l.halted)
		}
		if amt, ok := plan(l.left(l.reserved)); ok {
			if l.gap != nil {
				l.mu.Unlock()
				l.gap()
				l.mu.Lock()
			}
			l.reserved = l.reserved.Add(amt)
			l.mu.Unlock()
			return &Draw{l: l, amount: amt}, nil
		}
		if _, ok := plan(l.left(Amount{})); !ok {
			l.halted = l.describe()
			l.signal()
			l.mu.Unlock()
			return nil, fmt.Errorf("%w: %s", ErrCeiling, l.halted)
		}
		wait := l.changed
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-wait:
		}
	}
}

// unlimited stands for a quantity the ceiling does not cap.
const unlimited = 1 << 62

// left is what the ceiling leaves after spent and held; quantities the
// ceiling does not cap are unlimited. Called with mu held.
func (l *Ledger) left(held Amount) Amount {
	a := Amount{Tokens: unlimited, USD: unlimited}
	if l.ceiling.Tokens > 0 {
		a.Tokens = l.ceiling.Tokens - l.spent.Tokens - held.Tokens
	}
	if l.ceiling.USD > 0 {
		a.USD = l.ceiling.USD - l.spent.USD - held.USD
	}
	return a
}

// describe says which ceiling stopped the tree. Called with mu held.
func (l *Ledger) describe() string {
	var parts []string
	if l.ceiling.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d of the tree's %d tokens are spent", l.spent.Tokens, l.ceiling.Tokens))
	}
	if l.ceiling.USD > 0 {
		parts = append(parts, fmt.Sprintf("$%.6f of the tree's $%g is spent", l.spent.USD, l.ceiling.USD))
	}
	if len(parts) == 0 {
		return "the tree's ceiling is reached"
	}
	s := parts[0]
	for _, p := range parts[1:] {
		s += " and " + p
	}
	return s + ", too little for the next request"
}

// signal wakes the draws waiting for spend to settle. Called with mu held.
func (l *Ledger) signal() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Settle ends the draw: its reservation is released and actual, what
// the call really cost, is spent. Settling twice spends nothing more.
// actual may exceed the reservation (an input estimate that was low);
// the overrun is spent all the same, and the next draw sees it.
func (d *Draw) Settle(actual Amount) {
	l := d.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if d.settled {
		return
	}
	d.settled = true
	l.reserved = l.reserved.Sub(d.amount)
	l.spent = l.spent.Add(actual)
	l.signal()
}

// Charge spends actual without a draw: what a call the ledger never lent
// for cost (a fold's summary whose draw was made elsewhere).
func (l *Ledger) Charge(actual Amount) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spent = l.spent.Add(actual)
	l.signal()
}

// Halt stops the tree: every later draw is refused with reason. The first
// reason given stands.
func (l *Ledger) Halt(reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.halted == "" {
		l.halted = reason
		l.signal()
	}
}

// Halted returns why the tree halted, or "" while it runs.
func (l *Ledger) Halted() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.halted
}
