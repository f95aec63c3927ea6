// Package benchclock gives benchmarks a CPU clock (cpu-ns/op), which on a
// shared, oversubscribed machine varies far less than wall time: time spent
// descheduled is not counted. It is the benchmark process's CPU time on
// both sides, so that their ratio compares like with like: natively
// (Linux) getrusage(RUSAGE_SELF), under GOOS=js the Node.js process's
// process.cpuUsage(). Work a benchmark spreads over goroutines counts in
// full (a per-thread clock missed it and made parallel sealing look fifty
// times cheaper natively). Benchmarks report it next to ns/op, and
// scripts/benchratio prints the ratio of the two sides.
package benchclock
