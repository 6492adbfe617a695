// Package bench measures io-harness against its peers, each comparison
// run in one process so that every arm sees the same machine. It is a
// module of its own, so that the peers' dependencies stay out of the
// library's.
//
// The decoder benchmarks (decode_test.go) compare the harness's
// streaming decoders with the official SDKs'. BenchmarkSteps plays an
// N-step task (a fake model's write_file calls, then an answer) with
// io-harness, eino and langchaingo and reports each one's cost a step;
// README.md says what it measures, what each arm does and does not do,
// and why it is built as it is.
//
//	cd bench && go test -run '^$' -bench 'Steps/N=50$' -benchtime 20x
package bench
