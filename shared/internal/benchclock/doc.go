// Package benchclock gives benchmarks a CPU clock (cpu-ns/op), which on a
// shared, oversubscribed machine varies far less than wall time: time spent
// descheduled is not counted. Natively (Linux) it is the CPU time of the
// benchmark's own OS thread (getrusage RUSAGE_THREAD); under GOOS=js it is
// the Node.js process's CPU time (process.cpuUsage). Benchmarks report it
// next to ns/op, and scripts/benchratio prints the ratio of the two sides.
package benchclock
