package rdp

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Curve is an RDP curve: the mechanism is (Orders[i], Eps[i])-RDP for every
// i. Orders are > 1 and strictly increasing; Eps values are >= 0 and may be
// +Inf (no guarantee at that order).
type Curve struct {
	Orders []float64
	Eps    []float64
}

// ErrInvalid is wrapped by every input-validation error of this package.
var ErrInvalid = errors.New("rdp: invalid input")

// IntegerOrders returns the integer orders 2..maxOrder.
func IntegerOrders(maxOrder int) []float64 {
	var o []float64
	for a := 2; a <= maxOrder; a++ {
		o = append(o, float64(a))
	}
	return o
}

// DefaultOrders returns a grid of orders suited to DP-SGD-style
// accounting: 1.25..10 in steps of 0.25, then 11..64, then 72..512.
func DefaultOrders() []float64 {
	var o []float64
	for a := 1.25; a <= 10; a += 0.25 {
		o = append(o, a)
	}
	for a := 11; a <= 64; a++ {
		o = append(o, float64(a))
	}
	for a := 72; a <= 512; a += 8 {
		o = append(o, float64(a))
	}
	return o
}

// Validate checks the curve's shape.
func (c Curve) Validate() error {
	if len(c.Orders) == 0 || len(c.Orders) != len(c.Eps) {
		return fmt.Errorf("%w: %d orders and %d values", ErrInvalid, len(c.Orders), len(c.Eps))
	}
	for i, a := range c.Orders {
		if !check.Finite(a) || a <= 1 {
			return fmt.Errorf("%w: order %v must be finite and > 1", ErrInvalid, a)
		}
		if i > 0 && a <= c.Orders[i-1] {
			return fmt.Errorf("%w: orders not strictly increasing at %v", ErrInvalid, a)
		}
		if e := c.Eps[i]; math.IsNaN(e) || e < 0 {
			return fmt.Errorf("%w: RDP value %v at order %v", ErrInvalid, e, a)
		}
	}
	return nil
}

func validateOrders(orders []float64) error {
	return Curve{Orders: orders, Eps: make([]float64, len(orders))}.Validate()
}

// fromFunc evaluates f at each order. f must return a non-negative value
// (or +Inf) or an error.
func fromFunc(orders []float64, f func(alpha float64) (float64, error)) (Curve, error) {
	if err := validateOrders(orders); err != nil {
		return Curve{}, err
	}
	c := Curve{Orders: append([]float64(nil), orders...), Eps: make([]float64, len(orders))}
	for i, a := range orders {
		v, err := f(a)
		if err != nil {
			return Curve{}, err
		}
		if math.IsNaN(v) || v < 0 {
			return Curve{}, fmt.Errorf("%w: RDP value %v at order %v", ErrInvalid, v, a)
		}
		c.Eps[i] = v
	}
	return c, nil
}

// compose returns the RDP curve of the adaptive composition of mechanisms
// with the given curves (Mironov 2017 Proposition 1; check-in Lemma 1): the
// values add order by order. All curves must share the same orders.
func compose(curves ...Curve) (Curve, error) {
	if len(curves) == 0 {
		return Curve{}, fmt.Errorf("%w: nothing to compose", ErrInvalid)
	}
	out := Curve{Orders: append([]float64(nil), curves[0].Orders...), Eps: make([]float64, len(curves[0].Orders))}
	for _, c := range curves {
		if err := c.Validate(); err != nil {
			return Curve{}, err
		}
		if len(c.Orders) != len(out.Orders) {
			return Curve{}, fmt.Errorf("%w: curves have different orders", ErrInvalid)
		}
		for i, a := range c.Orders {
			if a != out.Orders[i] {
				return Curve{}, fmt.Errorf("%w: curves have different orders", ErrInvalid)
			}
			out.Eps[i] += c.Eps[i]
		}
	}
	return out, nil
}

// Scale returns the curve of the k-fold adaptive composition of c.
func (c Curve) Scale(k int) (Curve, error) {
	if k < 0 {
		return Curve{}, fmt.Errorf("%w: composition count %d < 0", ErrInvalid, k)
	}
	if err := c.Validate(); err != nil {
		return Curve{}, err
	}
	out := Curve{Orders: append([]float64(nil), c.Orders...), Eps: make([]float64, len(c.Eps))}
	for i, e := range c.Eps {
		out.Eps[i] = e * float64(k)
	}
	return out, nil
}

// At returns the value at an order present in the curve.
func (c Curve) At(alpha float64) (float64, bool) {
	for i, a := range c.Orders {
		if a == alpha {
			return c.Eps[i], true
		}
	}
	return 0, false
}

// logSumExp returns log(sum exp(x_i)).
func logSumExp(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	if math.IsInf(m, 0) {
		return m
	}
	var s float64
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// logChoose returns log C(n, k) for real n >= k >= 0 (k integer).
func logChoose(n float64, k int) float64 {
	a, _ := math.Lgamma(n + 1)
	b, _ := math.Lgamma(float64(k) + 1)
	c, _ := math.Lgamma(n - float64(k) + 1)
	return a - b - c
}
