package browsertest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"rsc.io/qr"
	"rsc.io/qr/coding"
)

// decodeQR reads the text of a QR code from its modules (black[y][x], no
// quiet zone), as a phone's camera would after locating it: it finds the
// error-correction level and mask whose format pixels match, reads the
// data bits through the mask in the order the code lays them out, and
// parses numeric, alphanumeric and byte segments. It does not correct
// errors: a rendered code has none, and one wrong format or terminator is
// an error.
func decodeQR(black [][]bool) (string, error) {
	n := len(black)
	if n < 21 || (n-17)%4 != 0 {
		return "", fmt.Errorf("qr: %d modules a side is not a QR code size", n)
	}
	v := coding.Version((n - 17) / 4)
	for l := coding.L; l <= coding.H; l++ {
		for m := coding.Mask(0); m < 8; m++ {
			p, err := coding.NewPlan(v, l, m)
			if err != nil {
				return "", fmt.Errorf("qr: %w", err)
			}
			if !formatMatches(p, black) {
				continue
			}
			data := make([]byte, p.DataBytes)
			for y, row := range p.Pixel {
				for x, pix := range row {
					if pix.Role() != coding.Data {
						continue
					}
					o := pix.Offset()
					// The plan's pixel is black for a 0 bit (mask applied).
					if black[y][x] != (pix&coding.Black != 0) {
						data[o/8] |= 1 << (7 - o%8)
					}
				}
			}
			return parseSegments(data, v)
		}
	}
	return "", errors.New("qr: no error-correction level and mask match the format pixels")
}

func formatMatches(p *coding.Plan, black [][]bool) bool {
	for y, row := range p.Pixel {
		for x, pix := range row {
			if pix.Role() == coding.Format && black[y][x] != (pix&coding.Black != 0) {
				return false
			}
		}
	}
	return true
}

// bitReader reads big-endian bit fields.
type bitReader struct {
	b   []byte
	off int
}

func (r *bitReader) read(n int) (int, error) {
	if r.off+n > 8*len(r.b) {
		return 0, errors.New("qr: data ends inside a segment")
	}
	v := 0
	for range n {
		v = v<<1 | int(r.b[r.off/8]>>(7-r.off%8)&1)
		r.off++
	}
	return v, nil
}

const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:"

// parseSegments decodes the data codewords' segments up to the
// terminator (or the end of the data).
func parseSegments(data []byte, v coding.Version) (string, error) {
	r := &bitReader{b: data}
	var out strings.Builder
	small := v <= 9
	for r.off+4 <= 8*len(data) {
		mode, _ := r.read(4)
		var err error
		switch mode {
		case 0:
			return out.String(), nil
		case 1: // numeric: 3 digits in 10 bits
			bits := map[bool]int{true: 10, false: 12}[small]
			var count int
			if count, err = r.read(bits); err != nil {
				return "", err
			}
			for count > 0 {
				k := min(count, 3)
				var d int
				if d, err = r.read(map[int]int{3: 10, 2: 7, 1: 4}[k]); err != nil {
					return "", err
				}
				fmt.Fprintf(&out, "%0*d", k, d)
				count -= k
			}
		case 2: // alphanumeric: 2 characters in 11 bits
			bits := map[bool]int{true: 9, false: 11}[small]
			var count int
			if count, err = r.read(bits); err != nil {
				return "", err
			}
			for ; count >= 2; count -= 2 {
				var d int
				if d, err = r.read(11); err != nil {
					return "", err
				}
				if d/45 >= len(alnum) {
					return "", errors.New("qr: bad alphanumeric pair")
				}
				out.WriteByte(alnum[d/45])
				out.WriteByte(alnum[d%45])
			}
			if count == 1 {
				var d int
				if d, err = r.read(6); err != nil {
					return "", err
				}
				out.WriteByte(alnum[d%45])
			}
		case 4: // bytes
			bits := map[bool]int{true: 8, false: 16}[small]
			var count int
			if count, err = r.read(bits); err != nil {
				return "", err
			}
			for range count {
				var c int
				if c, err = r.read(8); err != nil {
					return "", err
				}
				out.WriteByte(byte(c))
			}
		default:
			return "", fmt.Errorf("qr: unsupported segment mode %d", mode)
		}
	}
	return out.String(), nil
}

// TestDecodeQR: the decoder reads back what rsc.io/qr (the encoder of the
// pages' QR codes) wrote, for join links of every length a class might
// use, at every error-correction level, and texts of the other modes.
func TestDecodeQR(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{"http://127.0.0.2:8081/", "https://blanket.example.org/join", "0123456789", "HTTP://10.0.0.5:8081/"}
	for range 20 {
		texts = append(texts, fmt.Sprintf("http://192.168.%d.%d:%d/%s", rng.IntN(256), rng.IntN(256), 1024+rng.IntN(60000),
			strings.Repeat("x", rng.IntN(120))))
	}
	for _, text := range texts {
		for _, level := range []qr.Level{qr.L, qr.M, qr.Q, qr.H} {
			c, err := qr.Encode(text, level)
			if err != nil {
				t.Fatal(err)
			}
			black := make([][]bool, c.Size)
			for y := range black {
				black[y] = make([]bool, c.Size)
				for x := range black[y] {
					black[y][x] = c.Black(x, y)
				}
			}
			got, err := decodeQR(black)
			if err != nil || got != text {
				t.Fatalf("level %v: decoded %q (%v), want %q", level, got, err, text)
			}
		}
	}
}
