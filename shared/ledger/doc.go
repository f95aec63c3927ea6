// Package ledger is the privacy ledger of both servers: a durable,
// append-only, hash-chained record of every round's privacy.Release, and
// the gate that refuses a round whose release would take the composed
// privacy loss past a target (epsilon, delta).
//
// The aggregator keeps one for everything it publishes (Open, with the
// accountant of aggregator/internal/accounting); the relay keeps one for
// the noise it adds in secure summation (OpenNoise: the same accountant on
// the same releases, against the relay's own target), so that an
// aggregator that ignores its own ledger gets no noised share past the
// relay's target (docs/threat-model.md, "If a server deviates";
// docs/secagg.md, "Accounting"). What differs between the two is an
// option: RepeatLast (the relay's resumed round), PeerFile (where the
// other server's head is kept), the Composer or Session.
//
// # Protocol: charge first, then release
//
// A server must call Charge for a round BEFORE it decrypts, debiases,
// noises or publishes anything of that round, and must release only if
// Charge returned nil. Charge returns nil only after the record is
// written and fsynced, so every round whose result can have left the
// server is in the file.
//
// # Durability
//
// Every record goes through one write path (commit): one Write of the
// whole line, newline last, then one Sync of the file, and Charge returns
// nil only after both succeeded. If either fails (or the write is short),
// Charge returns an error matching ErrBroken and wrapping the failure, the
// ledger's state is exactly what it was before the call (Spent, Head,
// Releases: the round is not charged) and the caller must release
// nothing; every later charge fails with ErrBroken until the ledger is
// reopened (see Crash semantics for what the reopen finds). The file is
// reached through File, which a test replaces (Options.WrapFile,
// shared/ledger/ledgertest) to fail the write or the fsync.
//
// # Guarantee
//
// With Options.Session the ledger composes incrementally (a charge costs
// the same at round 300 as at round 3) and admits rounds by the session
// report's Tightest row: valid, proven, and certified (a method whose
// numerics cannot certify its result is an invalid row, and a report
// without a Tightest row refuses the charge as past the budget: a
// *BudgetError with Method NoProvenMethod). The charged epsilon never
// decreases.
//
// Spent reports the composition, by the injected Composer at the target
// delta, of every release charged. Charge refuses (ErrBudgetExhausted, with
// the would-be epsilon in a *BudgetError) any release after which that
// composition would exceed the target epsilon, so, provided the Composer is a
// valid accountant (for example privacy.Account's tightest valid method, or
// basic composition, Dwork and Roth 2014, Theorem 3.16), everything the
// server released under this ledger (the aggregator's published results,
// the relay's noised shares) is (TargetEpsilon, TargetDelta)-DP for every
// participant, for the neighbouring relation the accountant charges
// (replace one volunteer's data: docs/privacy.md, docs/secagg.md,
// "Accounting"). SpentBy gives the (smaller) loss of a volunteer that
// took part in only some of the rounds.
//
// # In the datastore
//
// Each server keeps its ledger in its one datastore (OpenStore; the
// relay's OpenNoiseStore): one record per key in BucketRecords, the value
// exactly the line of the file format below, so heads and hashes are the
// same whichever holds the records; the peer head in BucketPeer. A charge
// is one datastore Update, durable when Charge returns nil; a failed
// write or fsync (datastore.ErrNotDurable) fails the charge and breaks
// the ledger exactly as a failed fsync of the file does. ChargeWith puts
// the caller's writes in the same transaction. The former files are
// imported once (verified, then renamed NAME.imported, read-only; see
// OpenStore), and WriteTo and ExportDir give the records back in the
// file format. Open keeps the file-backed ledger (tools, tests, an
// exported file); everything below about the file, the torn tail and the
// lock is about it.
//
// # File format
//
// One JSON object per line, each line terminated by '\n':
//
//	{"v":2,"time":"...","release":{...},"crc32c":123,"eps":0.8,"delta":1e-6,"method":"...","prev":"<hex>"}
//
// prev is the hash chain: the SHA-256 of the previous complete line
// (all zeros for the first record), so every record commits to the whole
// file before it. Head returns (record count, hash of the last line) as a
// wire.Head; the aggregator stores it in its checkpoint and calls Verify
// on restart, which fails with ErrRollback when the file lost records (a
// deleted last line, an emptied or deleted file) or a record was
// rewritten: replaying such a file would under-count the privacy loss.
//
// release is the privacy.Release as JSON and crc32c is the CRC-32C
// (Castagnoli) of exactly those bytes, so a bit flip that still parses is
// detected. eps, delta and method record the composition after the charge, for
// audit; replay recomputes them with the current Composer (logging when it
// disagrees, which is expected after the accountant is improved). Unknown
// fields are rejected: an old binary must not silently ignore a field a newer
// one wrote, since that field may matter to accounting.
//
// # Anchors
//
// Each server also keeps the other's head (Peer: in the datastore,
// Ledger.Anchor; beside a ledger file, OpenPeer or Options.PeerFile)
// and never lets it go back (ErrRollback); the servers exchange heads
// over /v1/anchor (wire.Anchor) and a server whose ledger is behind the
// head the other holds refuses to start, or suspends its charges
// (Suspend, ErrSuspended): docs/threat-model.md, "Ledgers that anchor
// each other".
//
// # Older files
//
// Files written before this format are still read, as a prefix: the
// aggregator's version 1 lines (before the chain: no prev), and the
// relay's former noise-ledger lines ("v":1 with "round" and "prev", no
// crc32c or delta; chained exactly as version 2, so the heads the
// aggregator holds of them still verify). New records are always
// version 2. A peer file in the relay's former format (a wire.Anchor
// frame) is read too, and rewritten as JSON at the next change.
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
// must be reopened, which replays whatever the file holds: a fragment of
// the failed line is a torn tail (discarded, as above), a complete line
// counts. The failed round was not released (Charge returned an error), so
// counting it is an over-count, and either way the file still verifies
// against every head taken before the failure. Appending after a failure
// without reopening could chain a record onto a line the state does not
// hold, which is why the ledger refuses to.
//
// On Linux and the BSDs, Open takes an exclusive advisory lock (flock) on the
// file, so a second server process cannot append to the same ledger and
// each under-count the other's rounds (ErrLocked). Elsewhere (Windows,
// js/wasm) there is no lock and no directory fsync.
package ledger
