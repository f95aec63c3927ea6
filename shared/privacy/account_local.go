package privacy

import "fmt"

// AccountLocal returns the local-model guarantee of a volunteer who took
// part in the given releases: without counting any amplification by the
// shuffler, each report is (eps_l, delta_l)-LDP (the sum of its perturbed
// coordinates' budgets: FLAME Lemma 2, APES Theorem 3), so any
// post-processing of it is (eps_l, delta_l)-DP for replacing this user, and
// the releases compose by basic composition (Dwork and Roth 2014, Theorem
// 3.16). An SS-Topk release is not locally private (its indices are the
// volunteer's unperturbed top-k) and gives an invalid bound. It is the
// "local model" row of Account, exposed on its own so that
// a client (the browser's wasm module) can show a volunteer its own epsilon
// without linking the numerical accountants: the volunteer's own view is an
// upper bound on what the aggregator's amplified accounting charges.
func AccountLocal(releases []Release) (Bound, error) {
	runs := make([]run, 0, len(releases))
	for i, r := range releases {
		if err := r.Validate(); err != nil {
			return Bound{}, fmt.Errorf("release %d: %w", i, err)
		}
		runs = append(runs, run{r: r, count: 1})
	}
	return accountLocal(runs)[0].Bound, nil
}
