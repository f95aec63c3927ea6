package task

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// consentLabel domain-separates the consent hash from every other SHA-256
// of the system (the key fingerprint, the task file's digest).
const consentLabel = "blanket/v1 consent\x00"

// ConsentHash is the SHA-256 that names the consent text a volunteer
// agreed to: SHA-256("blanket/v1 consent" || 0x00 || u64be(len(text)) ||
// text), over the exact bytes (UTF-8) of t.Consent, the text the join
// page shows in #task-consent for every task, the built-in digits
// included (docs/web.md). It is the one derivation the browser client
// (wasm/internal/browser), the native cohort (scripts/internal/cohort)
// and the aggregator use: the volunteer's leader share in secure
// summation is sealed under an HPKE info that carries it
// (envelope.ShareInfo), so the aggregator opens only shares sealed by a
// client that held this text's hash (docs/threat-model.md, "Consent").
// A nil task has the hash of the empty text (which no valid task has).
func ConsentHash(t *Task) [32]byte {
	text := ""
	if t != nil {
		text = t.Consent
	}
	return ConsentTextHash(text)
}

// ConsentTextHash is ConsentHash of a task whose consent text is text.
func ConsentTextHash(text string) [32]byte {
	h := sha256.New()
	h.Write([]byte(consentLabel))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(text))))
	h.Write([]byte(text))
	return [32]byte(h.Sum(nil))
}

// ConsentVersion is the short form of a consent hash that the join page
// shows ("consent version 3f9a1b2c") and a study's publication can print
// beside the full hash: its first 8 lowercase hex digits.
func ConsentVersion(h [32]byte) string { return hex.EncodeToString(h[:4]) }
