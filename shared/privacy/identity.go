package privacy

// Structured identity of an accounting row, so that callers (the
// dashboard, the ledger) never parse Method strings. Method stays the
// human-readable name.

// Family names the bound a row rests on.
type Family string

// Families of AccountRow.
const (
	FamilyFMT21           Family = "fmt21"             // Feldman-McMillan-Talwar FOCS'21 clones
	FamilyFMT23           Family = "fmt23"             // FMT SODA'23 / Wang et al. generic variation-ratio
	FamilyVRLaplace       Family = "vr-laplace"        // variation-ratio pair of Laplace on [0, 1]
	FamilyVRRGB           Family = "vr-rgb"            // variation-ratio pair of R_{γ,b}
	FamilyFLAMEClosedForm Family = "flame-closed-form" // FLAME's closed forms (Bennett, Lemma 1)
	FamilyAPESClosedForm  Family = "apes-closed-form"  // APES's closed forms
	FamilyCheckInThm2     Family = "checkin-theorem2"  // shuffled check-in Theorem 2
	FamilyCheckInApp2     Family = "checkin-approach2" // shuffled check-in Approach 2
	FamilyCentralGaussian Family = "central-gaussian"  // central Gaussian noise (DP-FL)
	FamilySecAggDGauss    Family = "secagg-discrete-gaussian"
	FamilyLocal           Family = "local" // no amplification
)

// Amplification names what amplifies the local guarantee in a row.
type Amplification string

// Amplifications of AccountRow.
const (
	AmplificationNone              Amplification = "none"                               // local model, or central noise
	AmplificationShuffle           Amplification = "shuffle"                            // shuffling only
	AmplificationShuffleSubsampled Amplification = "shuffle+subsampled-all-coordinates" // Poisson coordinate sampling
	AmplificationShuffleFLAME2K    Amplification = "shuffle+subsampled-2k-coordinates"  // FLAME Theorem 4's structure
	AmplificationShuffleCheckIn    Amplification = "shuffle+check-in"                   // shuffled check-in
	AmplificationPoisson           Amplification = "poisson-subsampling"                // Poisson check-in of central noise
)

// Composition names how a row composes coordinates and rounds.
type Composition string

// Compositions of AccountRow.
const (
	CompositionPLD      Composition = "pld"      // privacy loss distributions, FFT
	CompositionRDP      Composition = "rdp"      // Rényi DP, converted to (ε, δ)
	CompositionBasic    Composition = "basic"    // basic composition of per-round bounds
	CompositionAdvanced Composition = "advanced" // advanced composition of per-round bounds
	CompositionExact    Composition = "exact"    // exact (a single shuffle, or Gaussian μ-GDP)
)

// amplificationOf maps a numerical subsampling mode to its Amplification.
func amplificationOf(mode subsampleMode, checkIn bool) Amplification {
	switch {
	case checkIn:
		return AmplificationShuffleCheckIn
	case mode == poissonCoordinates:
		return AmplificationShuffleSubsampled
	case mode == flameCoordinates:
		return AmplificationShuffleFLAME2K
	default:
		return AmplificationShuffle
	}
}

// finishRows sets the Proven flag of every row: a row is proven when it
// carries no caveat (its validity is then re-derived or cited as proven).
func finishRows(rows []AccountRow) {
	for i := range rows {
		rows[i].Proven = rows[i].Caveat == ""
	}
}
