// Package task describes what a Blanket study learns: a task definition is
// one JSON file the operator passes (`aggregator -task FILE`, `make run`'s
// runner `-task FILE`, `go run ./aggregator/lab simulate -task FILE`) that
// names the study (title, the consent text volunteers see), its features
// (numeric with a declared range, or categorical with declared categories),
// the label and its classes, the model (multinomial logistic regression,
// package logreg), where volunteers' data come from in the browser (a local
// CSV file, or a form: one row per volunteer, a survey), suggested privacy
// parameters and, optionally, a public holdout set to evaluate on. The
// embedded MNIST digits are one task among others and the default (Digits).
//
// The model's size follows from the schema: with F encoded features (one
// column per numeric feature, one per category of a categorical feature)
// and C classes, logreg's layout has d = (F + 1) · C parameters (C·F
// weights then C biases); Task.Shape and Task.D give it, and every protocol
// (package roundspec: the round's parameters, the accountant's release,
// the padding, secure summation's bounds) derives from that d. The
// optional training section (Training, resolved by Recipe with defaults
// chosen from d: DefaultRecipe) may name a fixed feature map of
// shared/features for a 28 x 28 image task; F is then the map's output
// length (Task.ModelFeatures: 833 for the digits' scatter1), and Prep is
// the one preprocessing every party applies (the map, then the public
// standardization of the mapped public training part).
//
// # Privacy guarantee of the preprocessing
//
// Everything computed from private data before training is a release, and
// this package releases nothing: the map from a volunteer's row to the
// feature vector it trains on (Encoder) is a fixed function of the task
// definition alone — min-max scaling by the declared range (to [0, 1], or
// to [-1, 1] with scale "symmetric") and one-hot encoding by the declared
// categories, the label's index among the declared classes. No mean,
// scale, category list, class balance or range is ever estimated from
// volunteers' data; a value outside its declared range or an undeclared
// category is refused with a row-level error, not clamped or learned, so
// that no party needs to see any data to agree on the encoding. The
// encoding runs on the volunteer's device (wasm) and is the same for every
// volunteer, so the only thing the protocol releases about a volunteer is
// its clipped model update, which the accountant charges (docs/privacy.md,
// docs/secagg.md). The one exception is the built-in digits task
// (preprocess "public-standardize"): its per-pixel standardization is
// fitted on the public training part of a public data set, never on a
// volunteer's data, and is allowed only for a built-in data set
// (docs/tasks.md).
//
// Evaluation follows the same rule: accuracy is shown only on a public
// holdout (the task's "holdout" file, or the built-in data set's test
// part). A task without one reports accuracy_source "none" and shows no
// accuracy (docs/tasks.md designs a private, charged alternative).
//
// The package is pure Go and builds for js/wasm: the browser client calls
// ParseCSV (bytes of the volunteer's file to encoded rows and friendly
// row-level errors) and EncodeAnswers (a survey form's answers).
package task
