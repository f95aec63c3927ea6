package audit

// attack is one distinguisher: a statistic of the aggregator's view.
type attack struct {
	name string
	stat func(v view, pr pair) float64
}

// side is +1 for a dimension of the target's H0 set, -1 for one of its H1
// set, 0 otherwise: the statistics below add it up (weighted) so that a
// shift toward either hypothesis moves them in opposite directions.
func (pr pair) side(j uint32) float64 {
	switch {
	case pr.a[j]:
		return 1
	case pr.b[j]:
		return -1
	}
	return 0
}

// attacks are the distinguishers every run applies. Together they look at
// every feature of the view: the header (n_p, message count), the index
// multiset, each message's position in the batch, each sealed size, and the
// values.
var attacks = []attack{
	// values: the sum of the opened values in the target's H0 dimensions
	// minus those in its H1 dimensions. The optimal linear test for a
	// Laplace or Gaussian shift of the target's reports.
	{name: "value sum", stat: func(v view, pr pair) float64 {
		s := 0.0
		for i, j := range v.index {
			s += pr.side(j) * v.value[i]
		}
		return s
	}},
	// extremes: how many values in the H0 dimensions lie above the top of
	// [0, 1], minus those in the H1 dimensions (a tail test, strong for
	// R_{γ,b}'s grid and for heavy-tailed noise).
	{name: "value extremes", stat: func(v view, pr pair) float64 {
		s := 0.0
		for i, j := range v.index {
			if v.value[i] >= 0.99 {
				s += pr.side(j)
			}
		}
		return s
	}},
	// header: the batch's n_p and size. Equal under both hypotheses unless
	// the padding depends on the data (a raised n_p that follows the
	// target's top-k set).
	{name: "header (n_p, size)", stat: func(v view, _ pair) float64 {
		return float64(v.np)*1e7 + float64(v.messages)
	}},
	// counts: how many messages carry an H0 dimension minus an H1
	// dimension (a dummy filter's end result: per-dimension counts that
	// follow the data).
	{name: "index counts", stat: func(v view, pr pair) float64 {
		s := 0.0
		for _, j := range v.index {
			s += pr.side(j)
		}
		return s
	}},
	// order: the mean position of H0-dimension messages minus that of
	// H1-dimension messages (a shuffle that leaves the target's messages
	// together, or real messages before dummies).
	{name: "positions", stat: func(v view, pr pair) float64 {
		var sa, sb, na, nb float64
		for i, j := range v.index {
			switch {
			case pr.a[j]:
				sa += float64(i)
				na++
			case pr.b[j]:
				sb += float64(i)
				nb++
			}
		}
		if na > 0 {
			sa /= na
		}
		if nb > 0 {
			sb /= nb
		}
		return sa - sb
	}},
	// first positions: where the first H0-dimension message sits (a
	// target whose messages come first).
	{name: "first position", stat: func(v view, pr pair) float64 {
		for i, j := range v.index {
			if pr.a[j] {
				return float64(i)
			}
		}
		return float64(len(v.index))
	}},
	// dummy filter: the messages whose value is not the batch's most
	// frequent exact value, counted in the H0 dimensions minus the H1
	// dimensions. If dummies (or reals) carry a recognizable value, this
	// drops them and recovers per-dimension real counts, which follow the
	// target's index set.
	{name: "dummy filter", stat: func(v view, pr pair) float64 {
		freq := make(map[float64]int, len(v.value))
		mode, best := 0.0, 0
		for _, x := range v.value {
			freq[x]++
			if freq[x] > best {
				mode, best = x, freq[x]
			}
		}
		if best < 2 {
			return 0 // every value distinct: nothing to filter by
		}
		s := 0.0
		for i, j := range v.index {
			if v.value[i] != mode {
				s += pr.side(j)
			}
		}
		return s
	}},
	// leading values: the values of the first messages of the batch, as
	// many as one volunteer sends on average (a relay that forwards
	// reports in arrival order, or puts dummies last).
	{name: "leading values", stat: func(v view, pr pair) float64 {
		s := 0.0
		for i := range min(max(1, v.perVolunteer), len(v.value)) {
			s += pr.side(v.index[i]) * v.value[i]
		}
		return s
	}},
	// sealed sizes: the total sealed bytes of H0-dimension messages (with
	// RealCrypto; every size is equal when nothing leaks).
	{name: "sealed sizes", stat: func(v view, pr pair) float64 {
		s := 0.0
		for i, n := range v.sealed {
			if pr.a[v.index[i]] {
				s += float64(n)
			}
		}
		return s
	}},
	// likelihood ratio (lrModel): the optimal test of one dimension the
	// neighbours differ in, and the sum of the per-dimension log
	// likelihood ratios over all of them.
	{name: "LR one dimension", stat: func(v view, _ pair) float64 { return v.llrOne }},
	{name: "LR combined", stat: func(v view, _ pair) float64 { return v.llrAll }},
	// the local likelihood ratio of the leading messages (lrModel.leading).
	{name: "LR leading values", stat: func(v view, pr pair) float64 { return pr.lr.leading(v) }},
}
