// Package webhpke is HPKE (RFC 9180) base mode, single shot, with the suite
// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM (ids 0x0020,
// 0x0001, 0x0001), composed from the browser's WebCrypto primitives
// (crypto.subtle: X25519 generateKey and deriveBits, AES-GCM encrypt and
// decrypt) through syscall/js and Go's crypto/hkdf (HKDF-SHA256, which
// costs less in wasm than a WebCrypto call per step). It exists so that
// the volunteer's browser seals with the browser's vetted, native
// implementations instead of Go code compiled to WebAssembly; shared/envelope
// uses it under js when the browser has WebCrypto X25519 (Available) and
// falls back to crypto/hpke otherwise. Nothing here is a cryptographic
// primitive: the package is RFC 9180's key schedule (LabeledExtract,
// LabeledExpand, section 4; Encap and Decap, section 4.1; KeySchedule,
// section 5.1; the nonce, section 5.2) over those primitives, and its
// tests check it byte for byte against RFC 9180's test vector for the
// suite (Appendix A.1, base mode) and against Go's crypto/hpke in both
// directions, in Node and in Chromium.
//
// WebCrypto is promise-based: every function here blocks its goroutine
// until the promises settle, so it must be called from a goroutine of its
// own, never from a syscall/js callback (which runs on the JavaScript event
// loop: it would wait forever for promises that loop has to settle). A
// batch of messages runs each step of the schedule for all of them at once
// (one Promise.all per step), so a batch costs four waits (generate,
// encapsulate, import the AEAD keys, encrypt), not four per message.
//
// The package builds only under GOOS=js; this file keeps it a package
// elsewhere.
package webhpke
