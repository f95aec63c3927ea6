// Package privacy implements the closed-form privacy bounds of the papers
// Blanket builds on, and the numerical Bennett bound that FLAME's printed
// numbers were computed with:
//
//   - the privacy blanket (Balle, Bell, Gascón, Nissim, CRYPTO 2019, "BBGN'19"):
//     the closed form for the randomizer R_{γ,k} (FLAME Lemma 1) and the
//     numerical Bennett-inequality bound for Laplace, k-RR and generic
//     ε0-LDP randomizers, in the form corrected by its authors in 2020;
//   - FLAME (Liu, Cao, Chen, Guo, Yoshikawa, AAAI 2021): composition
//     (Lemmas 2-3), subsampling (Lemma 4), SS-Simple (Theorem 1), double
//     amplification with dummy padding (SSDouble, Theorem 4);
//   - APES / Echo of Neighbors (Liu, Zhao, Xiong, Liu, Chen, AAAI 2023): the
//     uniform-shuffle baseline eq. (2) and the Echo-of-Neighbors central
//     bound (Theorem 4 with Lemma 4's neighbor divergence).
//
// The closed forms the ledger never charges — FLAME Theorems 2-3, the
// validity conditions of Corollaries 1-3, ν-index privacy (Theorem 5,
// Proposition 2), BasicComposition (Lemma 2 on its own), the Laplace blanket γ,
// S-APES's user-level bound (APES Proposition 1) and the CompareFLAME
// table — live in package paper (shared/privacy/paper), which reproduces
// the papers on top of this package.
//
// Every bound refuses, with an error wrapping ErrOutsideValidity, inputs
// outside the validity conditions its source states, and every malformed
// parameter (NaN, infinite, out of range) yields an error wrapping
// ErrInvalidParameter. Nothing panics.
//
// Bound is the common result type for comparison tables; CompareAPES
// (here) and paper.CompareFLAME list every applicable method side by side.
//
// Account composes a list of releases from scratch; Session composes them
// incrementally (one composition per method per round, so a charge costs
// the same at round 300 as at round 3) and is what the aggregator's ledger
// charges through. Both return rows with a structured identity (Family,
// Amplification, Composition, Proven). A numerical result that cannot be
// certified (an overflow, a NaN, a bisection without a bracket) is an
// invalid row wrapping ErrUncertified, never a number, and Report.Tightest
// only picks valid, proven, finite rows. Secure aggregation with
// distributed discrete Gaussian noise (ProtocolSecAgg) is accounted by
// RDP (secagg.go; CalibrateSecAggSigma). Derivations: docs/accounting.md.
//
// Where a paper's printed formula is misprinted or not a valid guarantee as
// printed, the doc comment of the implementing function says what was
// corrected and why. The uncorrected forms that reproduce the papers'
// printed numbers live only in this package's tests (reproduce_test.go),
// never in its API.
package privacy
