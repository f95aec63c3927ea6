package sumrelay

// A round whose relay was lost mid-round (docs/secagg.md, "Crash
// safety"): the relay that starts next on the same store (a restart, or a
// standby taking over) finishes it with the reports the aggregator folded,
// instead of aborting it.
//
// While the round is open, each chunk's sealed helper shares are persisted
// (persistChunk: a chunk record, a few hundred bytes per report, in the
// relay's acknowledgement log beside the shuffle protocols' records)
// before the chunk is posted, and a volunteer's ack waits until its
// chunk's verdicts came back (Report's fate). At the next start, Rebuild
// asks the aggregator for each persisted chunk's verdicts again
// (POST /v1/secagg/resume, wire.SecAggResume), in order, until a chunk it
// did not fold (from which on it folds none of the round); it re-prepares
// the folded chunks' helper shares (PrepInit is deterministic: the same
// 'P' entries the aggregator combined), applies the verdicts, and closes
// the round with those chunks as any close (Close): the same counts
// check at the aggregator, the same charge, the same noised release. So
// every report acknowledged before the loss is in the round, and no report
// is in it that the aggregator did not fold.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/acklog"
	"github.com/blanket-fl/blanket/relay/internal/aggclient"
	"github.com/blanket-fl/blanket/relay/internal/helper"
	"github.com/blanket-fl/blanket/relay/internal/metrics"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// ResumePath is the aggregator's route answering a persisted chunk's
// verdicts again.
const ResumePath = "/v1/secagg/resume"

// ChunkConn is the connection number under which a round's chunk records
// are kept in the acknowledgement log (Config.Chunks): no volunteer's
// connection has it (they are numbered from 1).
const ChunkConn = 0

// chunkKey is chunk seq's record key.
func chunkKey(seq uint32) string { return fmt.Sprintf("k%08d", seq) }

// chunkRecordVersion is the chunk record format's version.
const chunkRecordVersion = 1

// chunkRecord is a chunk's persisted helper shares, in the order the
// helper added them, with the round machine's count of check-ins when it
// was persisted.
//
//	0   1  version (1)
//	1   4  checkedIn u32
//	5   4  shares    u32 (>= 1)
//	9   4  shareLen  u32 (>= 1)
//	13  .  the sealed helper shares
type chunkRecord struct {
	checkedIn uint32
	helpers   [][]byte
}

func (c chunkRecord) marshal() ([]byte, error) {
	n := len(c.helpers)
	if n == 0 || len(c.helpers[0]) == 0 {
		return nil, errors.New("sumrelay: an empty chunk record")
	}
	sl := len(c.helpers[0])
	b := make([]byte, 13, 13+n*sl)
	b[0] = chunkRecordVersion
	binary.BigEndian.PutUint32(b[1:], c.checkedIn)
	binary.BigEndian.PutUint32(b[5:], uint32(n))
	binary.BigEndian.PutUint32(b[9:], uint32(sl))
	for i, h := range c.helpers {
		if len(h) != sl {
			return nil, fmt.Errorf("sumrelay: chunk record share %d of %d bytes, want %d", i, len(h), sl)
		}
		b = append(b, h...)
	}
	return b, nil
}

// parseChunkRecord decodes a chunk record, strictly.
func parseChunkRecord(b []byte) (chunkRecord, error) {
	if len(b) < 13 || b[0] != chunkRecordVersion {
		return chunkRecord{}, fmt.Errorf("sumrelay: chunk record of %d bytes, version %d", len(b), firstByte(b))
	}
	n, sl := binary.BigEndian.Uint32(b[5:]), binary.BigEndian.Uint32(b[9:])
	if n == 0 || sl == 0 || uint64(len(b)-13) != uint64(n)*uint64(sl) {
		return chunkRecord{}, fmt.Errorf("sumrelay: chunk record of %d bytes for %d shares of %d", len(b), n, sl)
	}
	c := chunkRecord{checkedIn: binary.BigEndian.Uint32(b[1:]), helpers: make([][]byte, n)}
	for i := range c.helpers {
		off := 13 + i*int(sl)
		c.helpers[i] = b[off : off+int(sl) : off+int(sl)]
	}
	return c, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// persistChunk keeps chunk seq's helper shares durably (Config.Chunks)
// before the chunk is posted; nil when there is no log (the relay then
// cannot finish the round after a loss, and aborts it as before). A failed
// write (the store restarting) is retried, the stream waiting, for up to
// persistWait; then, or if the relay stops first, the round ends: a chunk
// the aggregator could fold but a relay taking over could not find would
// make its close disagree. A retried write is the same upsert.
func (rl *Relay) persistChunk(ctx context.Context, st *Stream, seq uint32, helpers [][]byte) error {
	l := rl.cfg.Chunks
	if l == nil {
		return nil
	}
	rec := chunkRecord{helpers: helpers}
	if rl.cfg.CheckedIn != nil {
		rec.checkedIn = rl.cfg.CheckedIn(st.num)
	}
	b, err := rec.marshal()
	if err != nil {
		return &endError{SecAggFailed, "encoding a chunk record: " + err.Error()}
	}
	deadline := time.Now().Add(persistWait)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err = l.Append(st.num, ChunkConn, chunkKey(seq), b)
		if err == nil {
			return nil
		}
		if !time.Now().Add(wait).Before(deadline) {
			break
		}
		rl.roundLog(st.num).Warn("cannot persist a secure-summation chunk; retrying", "seq", seq, "err", err)
		select {
		case <-ctx.Done():
			return aggclient.ErrStopped
		case <-time.After(wait):
		}
	}
	rl.roundLog(st.num).Error("cannot persist a secure-summation chunk; ending the round", "seq", seq, "err", err)
	return &endError{SecAggFailed, "the relay could not persist a chunk"}
}

// persistWait bounds how long a chunk's record is retried (persistChunk):
// a PostgreSQL restart takes a few seconds.
const persistWait = 30 * time.Second

// dropChunks removes round num's chunk records: nothing more is owed for
// them (the close is persisted with the running aggregate, or the round
// ended).
func (rl *Relay) dropChunks(num uint64) {
	if l := rl.cfg.Chunks; l != nil {
		if err := l.Drop(num); err != nil {
			rl.roundLog(num).Error("cannot remove the round's chunk records", "err", err)
		}
	}
}

// chunkRecords returns round num's chunk records by seq.
func (rl *Relay) chunkRecords(num uint64) (map[uint32][]byte, error) {
	l := rl.cfg.Chunks
	if l == nil {
		return nil, nil
	}
	frames, err := l.Frames(num)
	if err != nil {
		return nil, err
	}
	out := make(map[uint32][]byte)
	for key, b := range frames[ChunkConn] {
		if !strings.HasPrefix(key, "k") {
			continue
		}
		seq, err := strconv.ParseUint(key[1:], 10, 32)
		if err != nil || seq == 0 {
			continue
		}
		out[uint32(seq)] = b
	}
	return out, nil
}

// Resumable reports whether round num, left open by a loss (marker: its
// open-round marker, acklog.Marker), is a secure-summation round with
// chunk records, which Rebuild finishes; otherwise the caller aborts it.
func (rl *Relay) Resumable(num uint64, marker []byte) bool {
	a, _, err := parseMarker(num, marker)
	if err != nil || a.Params.Protocol != wire.ProtocolSecAgg {
		return false
	}
	recs, err := rl.chunkRecords(num)
	return err == nil && recs[1] != nil
}

func parseMarker(num uint64, marker []byte) (*wire.Announcement, uint32, error) {
	var m acklog.Marker
	if err := json.Unmarshal(marker, &m); err != nil || len(m.Ann) == 0 {
		return nil, 0, acklog.ErrNoMarker
	}
	a, err := wire.ParseAnnouncement(m.Ann, wire.DefaultLimits())
	if err != nil {
		return nil, 0, err
	}
	if a.Round != num {
		return nil, 0, fmt.Errorf("sumrelay: marker of round %d for round %d", a.Round, num)
	}
	return a, m.Population, nil
}

// StartRebuild finishes round num (Resumable) in the background.
func (rl *Relay) StartRebuild(ctx context.Context, num uint64, marker []byte) {
	rl.wg.Go(func() { rl.Rebuild(ctx, num, marker) })
}

// Rebuild finishes secure-summation round num after the relay that
// collected it was lost (see the top of this file): it rebuilds the
// helper from the chunk records the aggregator folded, then closes the
// round (Close) with exactly those chunks. Nothing is posted that the
// aggregator did not fold. With no chunk folded, or records that do not
// rebuild the round, it aborts the round (relay restart: nothing charged).
//
// Guarantee: the release is the ordinary one (Close, then helper.Release):
// after the aggregator's charge of exactly the helper's accepted count n
// (at least MinBatch), the helper's share of the sum of those n quantized
// updates (L2 norm at most the round's Sensitivity each) plus one draw of
// the discrete Gaussian of variance sigma^2, charged first to the relay's
// own noise ledger as spec.Release(r, n, 0): (epsilon, delta) of that
// release for replace-one neighbouring datasets, docs/accounting.md §4
// (Canonne-Kamath-Steinke 2020 Prop. 5; Zhu-Wang 2019 Thm 6). The n
// reports are the ones the aggregator folded, so its unsharding sees the
// same set. The share is noised once: the open-round marker stays until
// the close is persisted, a second loss before that rebuilds the round
// again from the same records (the aggregator answers the same verdicts),
// and a loss after it resumes from the persisted close (Resume), never
// from the records.
func (rl *Relay) Rebuild(ctx context.Context, num uint64, marker []byte) {
	log := rl.roundLog(num)
	a, population, err := parseMarker(num, marker)
	st := &Stream{num: num, closeC: make(chan uint32, 1), done: make(chan struct{})}
	var recs map[uint32][]byte
	if err == nil {
		st.params = a.Params
		recs, err = rl.chunkRecords(num)
	}
	if err == nil {
		err = rl.setupHelper(st, a.Params)
	}
	if err != nil {
		st.setupErr = err
	}
	var checkedIn uint32
	if st.setupErr == nil {
		checkedIn = rl.refold(ctx, st, recs)
	}
	close(st.done)
	rl.mu.Lock()
	if rl.streams == nil {
		rl.streams = make(map[uint64]*Stream)
	}
	rl.streams[num] = st
	rl.mu.Unlock()
	if st.setupErr != nil {
		log.Error("cannot rebuild the secure-summation round interrupted by a restart", "err", st.setupErr)
	} else {
		log.Warn("secure-summation round interrupted by a relay restart; closing it with the chunks the aggregator folded",
			"chunks", st.chunks, "reports", st.sent, "persisted", len(recs))
	}
	c := &round.Closed{Num: num, Why: "relay restart", CheckedIn: max(checkedIn, st.sent), Population: max(population, checkedIn, st.sent),
		Reports: st.sent}
	if a != nil {
		c.Params, c.HPKEPub = a.Params, a.HPKEPub
	}
	var ee *endError
	failed := errors.As(st.end, &ee) && (ee.outcome == SecAggFailed || ee.outcome == SecAggInvalid)
	if st.setupErr == nil && (failed || (st.end == nil && st.chunks == 0)) {
		// Nothing folded (every recorded chunk was lost before the
		// aggregator folded it), or the records do not rebuild the round
		// (a record that does not fit, a chunk's answer the aggregator no
		// longer has): the round is aborted as before chunk records,
		// nothing charged, and the aggregator closes it at once.
		if failed {
			log.Error("cannot rebuild the secure-summation round interrupted by a restart; aborting it", "err", st.end)
		}
		rl.Take(num)
		rl.Receipts.Settle(num, "the round was cancelled: relay restart") // GET /api/receipt
		if e, ok := rl.cfg.Abort(c, metrics.ReportOf(c), wire.AbortRelayRestart, "relay restart"); ok {
			rl.dropChunks(num)
			rl.cfg.Enqueue(e)
		}
		return
	}
	rl.Close(ctx, c)
}

// setupHelper builds st's PINE round, verify key and helper for params.
func (rl *Relay) setupHelper(st *Stream, p wire.Params) error {
	spec, _, _, err := round.SecAggSpec(p)
	if err != nil {
		return err
	}
	sr, err := spec.SecAggRound(st.num)
	if err != nil {
		return err
	}
	vk, err := secagg.DeriveVerifyKey([]byte(rl.cfg.Token), st.num)
	if err != nil {
		return err
	}
	eng, err := secagg.NewEngine(sr, false, vk)
	if err != nil {
		return err
	}
	var open helper.Opener = rl.cfg.Open
	if w := rl.knobs().wrapOpen; w != nil {
		open = w(open)
	}
	h, err := helper.New(sr, eng, open, int(p.MinBatch), rl.cfg.Floor)
	if err != nil {
		return err
	}
	st.sr, st.vk, st.h = sr, vk, h
	return nil
}

// refold re-prepares and folds, in order, the recorded chunks the
// aggregator answers as folded (resumeChunk), stopping at the first it did
// not fold (the first seq without a record is asked too, so that the
// aggregator seals the round there: a chunk of the lost relay still on its
// way is never folded after); it returns the largest count of check-ins
// recorded with them. A definitive answer that ends the round, the
// relay's stop, or a record that does not fit (a chunk folded without a
// record, one that does not parse or prepare again) is st.end.
func (rl *Relay) refold(ctx context.Context, st *Stream, recs map[uint32][]byte) uint32 {
	var checkedIn uint32
	for seq := uint32(1); ; seq++ {
		b, recorded := recs[seq]
		reply, folded, err := rl.resumeChunk(ctx, st, seq)
		if err != nil {
			st.end = err
			return checkedIn
		}
		if !folded {
			return checkedIn
		}
		if !recorded {
			st.end = &endError{SecAggFailed, fmt.Sprintf("the aggregator folded chunk %d, which has no record here", seq)}
			return checkedIn
		}
		rec, err := parseChunkRecord(b)
		if err != nil {
			st.end = &endError{SecAggFailed, "a chunk record does not parse: " + err.Error()}
			return checkedIn
		}
		preps, err := rl.prepareRecord(ctx, st, rec.helpers)
		if err == nil {
			for _, p := range preps {
				if _, err = st.h.Add(p); err != nil {
					break
				}
			}
		}
		if err != nil {
			st.end = &endError{SecAggFailed, "a persisted chunk does not prepare again: " + err.Error()}
			return checkedIn
		}
		receipts := make([][32]byte, len(rec.helpers))
		for i, h := range rec.helpers {
			receipts[i] = wire.ReportReceipt(h)
			rl.Receipts.Received(st.num, receipts[i]) // GET /api/receipt
		}
		st.received += uint32(len(rec.helpers))
		if err := rl.applyVerdicts(st, reply, len(rec.helpers), receipts); err != nil {
			st.end = err
			return checkedIn
		}
		checkedIn = max(checkedIn, rec.checkedIn) // 0 for a chunk persisted after the round machine closed
	}
}

// resumeChunk asks the aggregator for chunk seq's verdicts again: the
// SecAggPrep reply as first answered and true if it folded the chunk,
// false if it did not (nor will, from seq on).
func (rl *Relay) resumeChunk(ctx context.Context, st *Stream, seq uint32) ([]byte, bool, error) {
	frame, err := (&wire.SecAggResume{Round: st.num, Seq: seq}).MarshalBinary()
	if err != nil {
		return nil, false, &endError{SecAggFailed, err.Error()}
	}
	limit := 1<<12 + int64(max(st.params.Quota, 1))<<10
	out, reply, why, err := rl.cfg.Post.Post(ctx, st.num, ResumePath, frame, limit, func(b []byte) error {
		p, err := wire.ParseSecAggPrep(b)
		if err == nil && p.Round != st.num {
			err = fmt.Errorf("prep reply for round %d", p.Round)
		}
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if out != outbox.Accepted && out != outbox.Duplicate {
		return nil, false, &endError{out.String(), why}
	}
	p, err := wire.ParseSecAggPrep(reply) // checked by Post
	if err != nil {
		return nil, false, &endError{SecAggInvalid, err.Error()}
	}
	return reply, p.Status == wire.BatchStatusOK, nil
}

// prepareRecord opens and prepares a recorded chunk's helper shares, as
// jobs on the relay's replicas (Config.PrepareApart) or here on the
// stream's workers; every share opened when it was first prepared, so one
// that does not now is an error.
func (rl *Relay) prepareRecord(ctx context.Context, st *Stream, sealed [][]byte) ([]helper.Prepared, error) {
	out := make([]helper.Prepared, len(sealed))
	if pa := rl.cfg.PrepareApart; pa != nil {
		preps, err := pa(ctx, Apart{Num: st.num, Params: st.params, VerifyKey: st.vk, Round: st.sr}, sealed)
		if err == nil && len(preps) == len(sealed) {
			for i, p := range preps {
				if p == nil {
					return nil, fmt.Errorf("share %d does not open", i)
				}
				rl.cfg.Metrics.SecAggApart.Add(1)
				out[i] = helper.PreparedApart(*p)
			}
			return out, nil
		}
		rl.roundLog(st.num).Warn("a persisted chunk prepared here: its job failed", "reports", len(sealed), "err", err)
	}
	var (
		wg   sync.WaitGroup
		next int
		mu   sync.Mutex // guards next and bad
		bad  = -1
	)
	for range rl.knobs().workers {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(sealed) {
					return
				}
				p, ok := st.h.Prepare(sealed[i])
				rl.cfg.Metrics.SecAggHere.Add(1)
				if !ok {
					mu.Lock()
					bad = i
					mu.Unlock()
					continue
				}
				out[i] = p
			}
		})
	}
	wg.Wait()
	if bad >= 0 {
		return nil, fmt.Errorf("share %d does not open", bad)
	}
	return out, nil
}
