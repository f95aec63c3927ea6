package outbox

// Store is where the relay keeps what it owes the aggregator: one record
// per (round, kind). The directory of files (Outbox) is one
// implementation; any other must keep the same guarantees:
//
//   - Put returns nil only once data survives a crash (a frame is sent
//     only after its Put returned nil);
//   - Get returns exactly the bytes of the last Put (an error wrapping
//     fs.ErrNotExist when there are none), so that a resend is byte for
//     byte the first send;
//   - Remove of a missing record is not an error;
//   - List returns every record, ordered by round, then kind.
type Store interface {
	Put(round uint64, kind Kind, data []byte) error
	Get(round uint64, kind Kind) ([]byte, error)
	Has(round uint64, kind Kind) bool
	Remove(round uint64, kind Kind) error
	List() ([]Entry, error)
}

var _ Store = (*Outbox)(nil)

// Recovery is what a restarted relay does with the records it finds
// (Recover).
type Recovery struct {
	// Last is the highest round any record names (0: none).
	Last uint64
	// Interrupted are the rounds left open (an OpenRound marker without
	// any outcome): each becomes an Abort (relay restart).
	Interrupted []uint64
	// Markers are every OpenRound marker, to remove once the rounds'
	// aborts are persisted.
	Markers []uint64
	// Resend are the frames the Sender delivers again (batches, aborts).
	Resend []Entry
	// Resume are the secure-summation steps to finish: a persisted close
	// (SecAggClose) not yet released, or a released aggregate share
	// (SecAggAggregate), to resend byte for byte.
	Resume []Entry
	// Released are the SecAggClose records of rounds whose noised share is
	// already persisted: resuming such a close would noise the round again
	// (two noise draws of one sum average the relay's noise down), so the
	// persisted share is the round's only release and the close is removed.
	Released []uint64
}

// Recover plans a restart from the records List returned (ordered by
// round, then kind). It reads and writes nothing: the caller persists the
// aborts, removes the markers and released closes, and queues the rest.
func Recover(ents []Entry) Recovery {
	var r Recovery
	done := make(map[uint64]bool)
	released := make(map[uint64]bool)
	for _, e := range ents {
		if e.Kind != OpenRound {
			done[e.Round] = true
		}
		if e.Kind == SecAggAggregate {
			released[e.Round] = true
		}
		r.Last = max(r.Last, e.Round)
	}
	for _, e := range ents {
		switch e.Kind {
		case SecAggClose:
			if released[e.Round] {
				r.Released = append(r.Released, e.Round)
				continue
			}
			r.Resume = append(r.Resume, e)
		case SecAggAggregate:
			r.Resume = append(r.Resume, e)
		case OpenRound:
			if !done[e.Round] {
				r.Interrupted = append(r.Interrupted, e.Round)
			}
			r.Markers = append(r.Markers, e.Round)
		default:
			r.Resend = append(r.Resend, e)
		}
	}
	return r
}
