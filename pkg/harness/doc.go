// Package harness drives an AI agent to a result that has been checked by
// running it.
//
// A caller hands [Run] a [TaskContract] — a goal, where the agent may work
// (one file, or a workspace directory), how the result is checked, and
// what it may spend — and [Options] with the model provider and the
// store. The harness then runs a loop of steps. A step is one model turn:
// the model is sent the contract, the tools and what came of earlier
// steps; it calls tools (read, write, edit, list, grep, find, exec, and any
// tool the caller registers), each through the permission policy and, when
// the policy asks, a person; then the verification gate runs, executing
// the agent's code in a sandbox where the checks say so; then the step is
// committed to the store in one transaction. The run ends with an
// [Outcome]: success when every check passes, or the budget, the failure
// or the person's pending decision that stopped it.
//
// Everything durable is in the store (package store, SQLite by default in
// store/sqlite, PostgreSQL for a fleet of workers in store/postgres;
// [OpenStore] chooses one by name): a run survives a crash or kill -9 and [Resume] continues
// it from its last committed step without redoing work, under a lease
// that lets one process drive it at a time. A decision a person makes
// later, from any process, is recorded with [Decide] for whoever drives
// the run next (a fleet's worker included), or given to
// [ResumeWithDecision], which drives the run on at once.
// [ReadTrace] reads a run back.
//
// The configuration is plain data with one JSON form ([Spec],
// docs/spec.md), shared by the C ABI, the Python and Node bindings and the
// io-harness command. The leaf packages hold the parts: provider (the
// model vendors), policy and approve (the permission boundary), tool (the
// workspace tools), verify (the gates), snapshot (the policy-filtered copy
// a command runs on), store, and package sandbox beside this one.
//
// A first run, with the scripted provider standing in for a model:
//
//	model, _ := scripted.Parse(scriptJSON)
//	st, _ := sqlite.Open(ctx, "trace.db")
//	res, err := harness.Run(ctx, harness.TaskContract{
//		Goal:         "Make TestAdd pass without editing the test.",
//		Root:         "./calc",
//		Verification: []verify.Check{{Kind: verify.GoTestPasses, Pin: []string{"calc_test.go"}}},
//		Budgets:      harness.Budgets{MaxSteps: 10, MaxCostUSD: 0.50},
//	}, harness.Options{Provider: model, Store: st})
//
// An error from Run means the run could not be driven (a bad contract, a
// store that cannot be written, another process driving it); every
// ending of a run that was driven, good or bad, is res.Outcome.
package harness
