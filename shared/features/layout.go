package features

// Layout is how a map's output is arranged: Channels images of Height x
// Width values, one after the other, each row-major (Scattering: channel
// 0 is order 0, the low-pass average of the image, then the order-1
// channels, j major and θ minor, then order 2). Value (ch, y, x) is at
// index ch*Height*Width + y*Width + x.
type Layout struct {
	Channels, Height, Width int
}

// Size is Channels * Height * Width, the map's output length.
func (l Layout) Size() int { return l.Channels * l.Height * l.Width }

// LayoutOf returns the layout of m's output for an input of in values
// read as m reads it (a square image, or AvgPool's Channels square
// images), and false when m does not accept that input or its output is
// not images (a map this package does not know).
func LayoutOf(m FeatureMap, in int) (Layout, bool) {
	switch m := m.(type) {
	case Identity:
		if s, ok := isqrt(in); ok {
			return Layout{1, s, s}, true
		}
	case AvgPool:
		if _, o, err := m.side(in); err == nil {
			return Layout{m.channels(), o, o}, true
		}
	case *Scattering:
		if _, err := m.Dim(in); err == nil {
			return Layout{m.Channels(), m.outSide, m.outSide}, true
		}
	case Chain:
		if _, err := m.Dim(in); err != nil {
			return Layout{}, false
		}
		d := in
		for _, x := range m[:len(m)-1] {
			d, _ = x.Dim(d) // checked by m.Dim
		}
		return LayoutOf(m[len(m)-1], d)
	}
	return Layout{}, false
}
