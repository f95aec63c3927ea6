package features

import (
	"fmt"
	"math"
	"sync"

	"gonum.org/v1/gonum/dsp/fourier"
)

// Scattering is the 2-D wavelet scattering transform (Bruna and Mallat,
// "Invariant Scattering Convolution Networks", IEEE TPAMI 2013) of one
// square image, computed as Kymatio's Scattering2D does (Andreux et al.,
// JMLR 2020; the feature extractor of Tramer and Boneh, ICLR 2021, §3):
// the image is reflect-padded to Mp = ((s + 2^J)/2^J + 1) 2^J, its
// Fourier transform is multiplied by Morlet wavelets ψ_{j,θ} (j < J, L
// orientations θ) and a Gaussian low-pass φ at scale 2^J, with the
// modulus between layers, subsampling in the Fourier domain by
// periodization, and one pixel of border dropped at the final resolution:
//
//	order 0:  x * φ_J, subsampled by 2^J
//	order 1:  |x * ψ_{j1,θ1}| * φ_J
//	order 2:  ||x * ψ_{j1,θ1}| * ψ_{j2,θ2}| * φ_J   (j2 > j1)
//
// For s = 28, J = 2, L = 8 (the digits) the output is 81 channels (1 +
// J L + L² J (J-1)/2) of 7 x 7, 3,969 features; with order 1 only, 17
// channels. Channel 0 is order 0, then the J L order-1 channels (j major,
// θ minor), then the order-2 channels in (j1, θ1, j2, θ2) order.
//
// The filters are Kymatio's (filter_bank.py: ψ_{j,θ} a Morlet of σ = 0.8
// 2^j, ξ = 3π/4 / 2^j, slant 4/L, orientation (L/2 - 1 - θ) π/L; φ a
// Gaussian of σ = 0.8 2^(J-1)), built here in code from these constants:
// the map is fixed and data-independent, so it costs no privacy (see the
// package comment). It is positively homogeneous (S(a x) = a S(x) for
// a > 0), its order-0 channel is linear, and its order-1 and order-2
// coefficients are local averages of moduli, hence non-negative.
type Scattering struct {
	side, j, l, order  int
	mp, padLo, outSide int
	padIdx             []int       // padded pixel -> source pixel
	psi                []wavelet   // j major, θ minor
	phi                [][]float64 // phi[r]: φ̂ periodized to resolution r
	work               sync.Pool   // *scatterWork
}

// wavelet is one ψ_{j,θ}: its Fourier transform (real: Kymatio keeps the
// real part, the imaginary part is zero up to rounding) periodized to
// each resolution r it is used at.
type wavelet struct {
	j, theta int
	levels   [][]float64
}

// NewScattering returns the scattering of side x side images with J
// scales, L orientations and orders up to order (1 or 2).
func NewScattering(side, j, l, order int) (*Scattering, error) {
	if j < 1 || j > 4 || l < 1 || l > 16 || order < 1 || order > 2 {
		return nil, fmt.Errorf("features: scattering with J = %d, L = %d, order %d (want 1 <= J <= 4, 1 <= L <= 16, order 1 or 2)", j, l, order)
	}
	step := 1 << j
	if side < 2*step {
		return nil, fmt.Errorf("features: scattering of side %d needs side >= %d for J = %d", side, 2*step, j)
	}
	mp := ((side+step)/step + 1) * step
	s := &Scattering{side: side, j: j, l: l, order: order, mp: mp, padLo: (mp - side) / 2}
	s.outSide = mp/step - 2
	if s.padLo >= side || mp-side-s.padLo >= side {
		return nil, fmt.Errorf("features: scattering padding %d too large for side %d", s.padLo, side)
	}
	s.padIdx = make([]int, mp*mp)
	reflect := func(i int) int { // numpy "reflect": ... 2 1 | 0 1 2 ... s-1 | s-2 ...
		i -= s.padLo
		for i < 0 || i >= side {
			if i < 0 {
				i = -i
			}
			if i >= side {
				i = 2*(side-1) - i
			}
		}
		return i
	}
	for r := 0; r < mp; r++ {
		for c := 0; c < mp; c++ {
			s.padIdx[r*mp+c] = reflect(r)*side + reflect(c)
		}
	}
	for jj := 0; jj < j; jj++ {
		for t := 0; t < l; t++ {
			theta := float64(l-l/2-1-t) * math.Pi / float64(l)
			sigma := 0.8 * math.Exp2(float64(jj))
			xi := 3.0 / 4.0 * math.Pi / math.Exp2(float64(jj))
			ft := realFFT2(morlet2D(mp, sigma, theta, xi, 4/float64(l)))
			w := wavelet{j: jj, theta: t}
			for r := 0; r < min(jj+1, max(j-1, 1)); r++ {
				w.levels = append(w.levels, periodize(ft, mp, 1<<r))
			}
			s.psi = append(s.psi, w)
		}
	}
	ft := realFFT2(gabor2D(mp, 0.8*math.Exp2(float64(j-1)), 0, 0, 1))
	for r := 0; r < j; r++ {
		s.phi = append(s.phi, periodize(ft, mp, 1<<r))
	}
	s.work.New = func() any { return s.newWork() }
	return s, nil
}

// Channels is the number of output channels: 1 + J L, plus L² J (J-1)/2
// at order 2.
func (s *Scattering) Channels() int {
	c := 1 + s.j*s.l
	if s.order == 2 {
		c += s.l * s.l * s.j * (s.j - 1) / 2
	}
	return c
}

// OutSide is the side of each output channel (7 for 28 x 28, J = 2).
func (s *Scattering) OutSide() int { return s.outSide }

// Dim returns Channels() * OutSide()² for an input of side² pixels.
func (s *Scattering) Dim(in int) (int, error) {
	if in != s.side*s.side {
		return 0, fmt.Errorf("features: scattering of %d x %d images got an input of length %d", s.side, s.side, in)
	}
	return s.Channels() * s.outSide * s.outSide, nil
}

// gabor2D is Kymatio's gabor_2d on an n x n periodic grid (offset 0,
// periodized over 5 x 5 tiles), normalized by 2π σ² / slant.
func gabor2D(n int, sigma, theta, xi, slant float64) []complex128 {
	c, sn := math.Cos(theta), math.Sin(theta)
	// curv = R D R^-1 / (2 σ²) with D = diag(1, slant²).
	s2 := slant * slant
	c00 := (c*c + s2*sn*sn) / (2 * sigma * sigma)
	c01 := (c*sn - s2*sn*c) / (2 * sigma * sigma) // = curv[0][1] = curv[1][0]
	c11 := (sn*sn + s2*c*c) / (2 * sigma * sigma)
	g := make([]complex128, n*n)
	for ex := -2; ex <= 2; ex++ {
		for ey := -2; ey <= 2; ey++ {
			for a := 0; a < n; a++ {
				x := float64(a + ex*n)
				for b := 0; b < n; b++ {
					y := float64(b + ey*n)
					re := -(c00*x*x + 2*c01*x*y + c11*y*y)
					im := xi * (x*c + y*sn)
					e := math.Exp(re)
					g[a*n+b] += complex(e*math.Cos(im), e*math.Sin(im))
				}
			}
		}
	}
	norm := complex(2*math.Pi*sigma*sigma/slant, 0)
	for i := range g {
		g[i] /= norm
	}
	return g
}

// morlet2D is Kymatio's morlet_2d: the Gabor minus its envelope times
// the constant that makes the mean zero.
func morlet2D(n int, sigma, theta, xi, slant float64) []complex128 {
	wv := gabor2D(n, sigma, theta, xi, slant)
	env := gabor2D(n, sigma, theta, 0, slant)
	var sw, se complex128
	for i := range wv {
		sw += wv[i]
		se += env[i]
	}
	k := sw / se
	for i := range wv {
		wv[i] -= k * env[i]
	}
	return wv
}

// realFFT2 is the real part of the 2-D DFT of the n x n array x.
func realFFT2(x []complex128) []float64 {
	n, _ := isqrt(len(x))
	p := newPlan(n)
	y := append([]complex128(nil), x...)
	p.transform(y, false)
	out := make([]float64, len(y))
	for i, v := range y {
		out[i] = real(v)
	}
	return out
}

// periodize is Kymatio's periodize_filter_fft: the n x n filter averaged
// over its k x k periods, the filter at resolution n/k.
func periodize(f []float64, n, k int) []float64 {
	m := n / k
	out := make([]float64, m*m)
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			out[(a%m)*m+b%m] += f[a*n+b]
		}
	}
	for i := range out {
		out[i] /= float64(k * k)
	}
	return out
}

// plan is a 2-D FFT of n x n complex arrays.
type plan struct {
	n   int
	fft *fourier.CmplxFFT
	col []complex128
}

func newPlan(n int) *plan {
	return &plan{n: n, fft: fourier.NewCmplxFFT(n), col: make([]complex128, n)}
}

// transform replaces x by its 2-D DFT, or its normalized inverse.
func (p *plan) transform(x []complex128, inverse bool) {
	n := p.n
	f := p.fft.Coefficients
	if inverse {
		f = p.fft.Sequence
	}
	for r := 0; r < n; r++ {
		row := x[r*n : (r+1)*n]
		f(row, row)
	}
	for c := 0; c < n; c++ {
		for r := 0; r < n; r++ {
			p.col[r] = x[r*n+c]
		}
		f(p.col, p.col)
		for r := 0; r < n; r++ {
			x[r*n+c] = p.col[r]
		}
	}
	if inverse {
		inv := complex(1/float64(n*n), 0)
		for i := range x {
			x[i] *= inv
		}
	}
}

// scatterWork is one Apply's scratch: a plan and buffers per resolution.
type scatterWork struct {
	plans           []*plan
	u0              []complex128
	u1, u2, mul, sb [][]complex128
}

func (s *Scattering) newWork() *scatterWork {
	w := &scatterWork{u0: make([]complex128, s.mp*s.mp)}
	for r := 0; r <= s.j; r++ {
		n := s.mp >> r
		w.plans = append(w.plans, newPlan(n))
		for _, b := range []*[][]complex128{&w.u1, &w.u2, &w.mul, &w.sb} {
			*b = append(*b, make([]complex128, n*n))
		}
	}
	return w
}

// subsample is Kymatio's subsample_fourier: the n x n spectrum x
// averaged over its k x k periods into dst (n/k x n/k); its inverse DFT
// is the inverse DFT of x sampled every k pixels.
func subsample(dst, x []complex128, n, k int) {
	m := n / k
	clear(dst[:m*m])
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			dst[(a%m)*m+b%m] += x[a*n+b]
		}
	}
	inv := complex(1/float64(k*k), 0)
	for i := range dst[:m*m] {
		dst[i] *= inv
	}
}

// band computes the spectrum of |IDFT(src ψ̂)| at resolution r1: src is
// at resolution r0, filt ψ̂ periodized to r0, the product is subsampled
// by 2^(r1-r0) before the inverse transform.
func (s *Scattering) band(w *scatterWork, dst, src []complex128, filt []float64, r0, r1 int) {
	n0 := s.mp >> r0
	m := w.mul[r0]
	for i, f := range filt {
		m[i] = src[i] * complex(f, 0)
	}
	if r1 > r0 {
		subsample(dst, m, n0, 1<<(r1-r0))
	} else {
		copy(dst, m)
	}
	p := w.plans[r1]
	p.transform(dst, true)
	for i, v := range dst {
		re, im := real(v), imag(v)
		dst[i] = complex(math.Sqrt(re*re+im*im), 0)
	}
	p.transform(dst, false)
}

// lowpass writes the real part of IDFT(src φ̂) subsampled to resolution
// J, without its one-pixel border, into out (outSide² values); src is at
// resolution r.
func (s *Scattering) lowpass(w *scatterWork, out []float64, src []complex128, r int) {
	n := s.mp >> r
	m := w.mul[r]
	for i, f := range s.phi[r] {
		m[i] = src[i] * complex(f, 0)
	}
	sb := w.sb[s.j]
	subsample(sb, m, n, 1<<(s.j-r))
	w.plans[s.j].transform(sb, true)
	nj := s.mp >> s.j
	for a := 0; a < s.outSide; a++ {
		for b := 0; b < s.outSide; b++ {
			out[a*s.outSide+b] = real(sb[(a+1)*nj+b+1])
		}
	}
}

// Apply writes the scattering coefficients of the side x side image src
// (row-major) into dst, channel after channel (see Scattering).
func (s *Scattering) Apply(dst, src []float64) error {
	if err := checkIO(s, dst, src); err != nil {
		return err
	}
	w := s.work.Get().(*scatterWork)
	defer s.work.Put(w)
	for i, k := range s.padIdx {
		w.u0[i] = complex(src[k], 0)
	}
	w.plans[0].transform(w.u0, false)
	per := s.outSide * s.outSide
	ch := 0
	next := func() []float64 {
		out := dst[ch*per : (ch+1)*per]
		ch++
		return out
	}
	s.lowpass(w, next(), w.u0, 0)
	second := 1 + len(s.psi) // the first order-2 channel
	for _, p1 := range s.psi {
		u1 := w.u1[p1.j]
		s.band(w, u1, w.u0, p1.levels[0], 0, p1.j)
		s.lowpass(w, next(), u1, p1.j)
		if s.order < 2 {
			continue
		}
		for _, p2 := range s.psi {
			if p2.j <= p1.j {
				continue
			}
			u2 := w.u2[p2.j]
			s.band(w, u2, u1, p2.levels[p1.j], p1.j, p2.j)
			s.lowpass(w, dst[second*per:(second+1)*per], u2, p2.j)
			second++
		}
	}
	return nil
}
