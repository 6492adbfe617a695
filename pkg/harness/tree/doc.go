// Package tree holds the shared mechanisms of a tree of agents: the one
// ledger every agent's spend is drawn from ([Ledger]), the concurrency
// slots that bound how many agents step at once ([Slots]), and the
// workspace guard that keeps siblings from losing each other's writes
// ([Workspace]).
//
// The harness drives the agents; this package decides nothing about
// models, tools or the store. Each type is safe for concurrent use.
package tree
