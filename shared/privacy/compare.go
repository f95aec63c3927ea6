package privacy

// CompareAPES lists, side by side, the dimension-level central bounds for
// users with local budgets eps at shuffling slack deltaS: no amplification
// (PLDP), the UniS baseline (eq. 2) and the Echo-of-Neighbors bound
// (Theorem 4, corrected) with Lemma 4's and with the exact neighbor
// divergence. Rows whose conditions fail are included with Valid = false.
func CompareAPES(eps []float64, deltaS float64) []Bound {
	noShuffle, _ := apesNoShuffle(eps)
	uniS, _ := apesUniS(eps, deltaS)
	eonL4, _ := eonBound(eps, deltaS, false)
	eonExact, _ := eonBound(eps, deltaS, true)
	return []Bound{noShuffle, uniS, eonL4, eonExact}
}
