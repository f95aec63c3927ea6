package wire

// Ledger anchors (docs/threat-model.md, "Ledgers that anchor each other"):
// the aggregator's privacy ledger and the relay's noise ledger are each
// hash-chained, so a ledger's head (its record count and the chain hash
// after its last record) names its whole content. Each server keeps the
// other's latest head; on start each asks the other for the head it holds
// of its own ledger and refuses to charge (or noise) while its ledger is
// behind it.
//
// Anchor, 82 bytes (offset size field):
//
//	0 1 version, 1 1 type = 0x40 (outside the frame types of PeekType: an
//	anchor never travels on a volunteer's websocket),
//	2 8 own count u64, 10 32 own hash,
//	42 8 held count u64, 50 32 held hash
//
// own is the sender's ledger head; held is the head of the receiver's
// ledger that the sender holds (zero count and hash: none). A head with
// count 0 must have the all-zero hash.

// AnchorSize is the size of an Anchor frame.
const AnchorSize = 82

// typeAnchor is the anchor frame's type byte.
const typeAnchor = 0x40

// maxAnchorCount bounds a head's record count (far above any ledger: a
// round every second for 30 years is below 2^30).
const maxAnchorCount = 1 << 40

// Head is a hash-chained ledger's head: Count committed records, Hash the
// chain value after the last one (all zeros when Count is 0).
type Head struct {
	Count uint64
	Hash  [32]byte
}

// IsZero reports whether h is the empty ledger's head.
func (h Head) IsZero() bool { return h.Count == 0 && h.Hash == [32]byte{} }

func (h Head) valid() error {
	if h.Count > maxAnchorCount {
		return malformed(ErrValue, "anchor: count %d above %d", h.Count, uint64(maxAnchorCount))
	}
	if h.Count == 0 && h.Hash != [32]byte{} {
		return malformed(ErrValue, "anchor: an empty ledger's head has the zero hash")
	}
	return nil
}

// Anchor is one server's ledger head and the head of the other server's
// ledger it holds.
type Anchor struct {
	Own  Head // the sender's ledger head
	Held Head // the receiver's head as the sender last recorded it
}

// MarshalBinary encodes a, refusing a head ParseAnchor would refuse.
func (a *Anchor) MarshalBinary() ([]byte, error) {
	if err := a.Own.valid(); err != nil {
		return nil, err
	}
	if err := a.Held.valid(); err != nil {
		return nil, err
	}
	b := make([]byte, AnchorSize)
	b[0], b[1] = Version, typeAnchor
	be.PutUint64(b[2:], a.Own.Count)
	copy(b[10:42], a.Own.Hash[:])
	be.PutUint64(b[42:], a.Held.Count)
	copy(b[50:82], a.Held.Hash[:])
	return b, nil
}

// ParseAnchor decodes an Anchor strictly: exact size, version, type, each
// count at most 2^40 and a zero count only with the zero hash (so an
// accepted frame re-encodes to the same bytes).
func ParseAnchor(b []byte) (*Anchor, error) {
	if err := exactLen(b, AnchorSize, "anchor"); err != nil {
		return nil, err
	}
	if b[0] != Version {
		return nil, malformed(ErrVersion, "version %d, want %d", b[0], Version)
	}
	if b[1] != typeAnchor {
		return nil, malformed(ErrType, "anchor: type %d, want %d", b[1], typeAnchor)
	}
	a := &Anchor{}
	a.Own.Count = be.Uint64(b[2:])
	copy(a.Own.Hash[:], b[10:42])
	a.Held.Count = be.Uint64(b[42:])
	copy(a.Held.Hash[:], b[50:82])
	if err := a.Own.valid(); err != nil {
		return nil, err
	}
	if err := a.Held.valid(); err != nil {
		return nil, err
	}
	return a, nil
}
