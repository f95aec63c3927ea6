// Package ledger is the aggregator's privacy ledger: a durable, append-only
// record of every round's privacy.Release, and the gate that refuses a round
// whose release would take the composed privacy loss past the deployment's
// (epsilon, delta) budget.
//
// # Protocol: charge first, then release
//
// The aggregator must call Charge for a round BEFORE it decrypts, debiases or
// publishes anything of that round, and must publish only if Charge returned
// nil. Charge returns nil only after the record is written and fsynced, so
// every round whose result can have left the aggregator is in the file.
//
// # Guarantee
//
// With Options.Session the ledger composes incrementally (a charge costs
// the same at round 300 as at round 3) and admits rounds by the session
// report's Tightest row: valid, proven, and certified (a method whose
// numerics cannot certify its result is an invalid row, and a report
// without a Tightest row refuses the charge with ErrComposer). The charged
// epsilon never decreases.
//
// Spent reports the composition, by the injected Composer at the target
// delta, of every release charged. Charge refuses (ErrBudgetExhausted, with
// the would-be epsilon in a *BudgetError) any release after which that
// composition would exceed the target epsilon, so, provided the Composer is a
// valid accountant (for example privacy.Account's tightest valid method, or
// basic composition, Dwork and Roth 2014, Theorem 3.16), everything the
// aggregator published under this ledger is (TargetEpsilon, TargetDelta)-DP
// for every participant. SpentBy gives the (smaller) loss of a volunteer that
// took part in only some of the rounds.
//
// # File format
//
// One JSON object per line, each line terminated by '\n':
//
//	{"v":2,"time":"...","release":{...},"crc32c":123,"eps":0.8,"delta":1e-6,"method":"...","prev":"<hex>"}
//
// prev is the hash chain: the SHA-256 of the previous complete line
// (all zeros for the first record), so every record commits to the whole
// file before it. Head returns (record count, hash of the last line);
// the aggregator stores it in its checkpoint and calls Verify on restart,
// which fails with ErrRollback when the file lost records (a deleted last
// line, an emptied or deleted file) or a record was rewritten: replaying
// such a file would under-count the privacy loss. Version 1 lines (before
// the chain, no prev) are still read as a prefix.
//
// release is the privacy.Release as JSON and crc32c is the CRC-32C
// (Castagnoli) of exactly those bytes, so a bit flip that still parses is
// detected. eps, delta and method record the composition after the charge, for
// audit; replay recomputes them with the current Composer (logging when it
// disagrees, which is expected after the accountant is improved). Unknown
// fields are rejected: an old binary must not silently ignore a field a newer
// one wrote, since that field may matter to accounting.
//
// # Crash semantics
//
// A record is committed exactly when its terminating '\n' is in the file.
// Each Charge issues a single write of the whole line (newline last) followed
// by fsync, and returns nil only after the fsync, so:
//
//   - A crash after the fsync leaves a complete line: it counts on replay,
//     whether or not the round was then released (counting a charged but
//     unreleased round over-estimates the loss; never under-estimates it).
//   - A crash during the write or before the fsync completed can leave a
//     trailing fragment without '\n' (a torn line; on some file systems a run
//     of zero bytes). Charge had not returned, so under charge-first the round
//     was NOT released. Open therefore does not count it: it logs a warning
//     with the fragment, exposes it through DiscardedTail, truncates the file
//     back to the last complete record and fsyncs, so that appends never
//     concatenate onto a fragment. The round number is free to be charged
//     again. This holds even if the fragment happens to be a complete JSON
//     object missing only its newline: without the newline the write was not
//     complete, hence not fsynced, hence not released.
//   - A crash after the write but before the fsync may leave the complete
//     line on disk anyway (the page cache was flushed): it counts. Again an
//     over-count, never an under-count.
//
// Any complete line that cannot be trusted (bad JSON, unknown field, CRC
// mismatch, invalid release, round not strictly increasing, blank line) is a
// hard error on Open (ErrCorrupt), never skipped: skipping a committed record
// could under-count. Open leaves such a file untouched for an operator.
//
// If a write or fsync fails at run time, the ledger cannot know what reached
// the disk; it becomes broken (every later Charge fails with ErrBroken) and
// must be reopened, which replays whatever the file holds. The failed round
// was not released (Charge returned an error) and counts on replay if its
// line turned out complete, an over-count.
//
// On Linux and the BSDs, Open takes an exclusive advisory lock (flock) on the
// file, so a second aggregator process cannot append to the same ledger and
// each under-count the other's rounds (ErrLocked).
package ledger
