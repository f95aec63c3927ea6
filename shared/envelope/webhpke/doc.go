// Package webhpke is HPKE (RFC 9180) base mode, single shot, with the suite
// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM (ids 0x0020,
// 0x0001, 0x0001), written once (schedule.go) over a small set of
// primitives that two implementations provide:
//
//   - Seal and Open (GOOS=js only): the browser's WebCrypto (crypto.subtle:
//     X25519 generateKey and deriveBits, AES-GCM encrypt and decrypt)
//     through syscall/js, so that the volunteer's browser seals with its
//     vetted, native implementations instead of Go code compiled to
//     WebAssembly;
//   - SealGo and OpenGo (every platform): Go's standard library, crypto/ecdh
//     (X25519) and crypto/aes with crypto/cipher (GCM). shared/envelope
//     seals with SealGo under js where the browser's WebCrypto lacks X25519
//     (or the page, outside a secure context, has no crypto.subtle). It is
//     there instead of crypto/hpke, whose KEM table links the NIST curves
//     and ML-KEM into the browser module for a suite it never uses; native
//     programs keep crypto/hpke.
//
// HKDF-SHA256 is Go's crypto/hkdf in both (it costs less in wasm than a
// WebCrypto call per step). Nothing here is a cryptographic primitive:
// the package is RFC 9180's key schedule (LabeledExtract, LabeledExpand,
// section 4; Encap and Decap, section 4.1, with the all-zero DH check of
// section 7.1.4; KeySchedule, section 5.1; the nonce, section 5.2) over
// those primitives. Its guarantee is RFC 9180's for base mode: a sealed
// message is confidential and integrity-protected against anyone without
// the recipient's X25519 private key, with a fresh ephemeral key pair per
// message; it does not authenticate the sender. Its output is byte for
// byte crypto/hpke's for the same ephemeral key: the tests check both
// implementations against RFC 9180's vector for the suite (Appendix A.1.1:
// key, base nonce, six encryptions, and the 1000 accumulated encryptions
// crypto/hpke's tests check) and against crypto/hpke in both directions,
// natively (the Go primitives), in Node and in Chromium (both).
//
// WebCrypto is promise-based: Seal, Open and Available block their
// goroutine until the promises settle, so they must be called from a
// goroutine of their own, never from a syscall/js callback (which runs on
// the JavaScript event loop: it would wait forever for promises that loop
// has to settle). A batch of messages runs each step of the schedule for
// all of them at once (one Promise.all per step), so a batch costs four
// waits (generate, encapsulate, import the AEAD keys, encrypt), not four
// per message. SealGo and OpenGo never block on promises.
package webhpke
