package noise

// secureBufSize is the block Secure reads from crypto/rand under js/wasm:
// one crypto.getRandomValues call per 1024 words (the call's limit is
// 65536 bytes).
const secureBufSize = 8 << 10
