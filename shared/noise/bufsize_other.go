//go:build !js

package noise

// secureBufSize is the block Secure reads from crypto/rand natively: one
// getrandom system call per 64 words.
const secureBufSize = 512
