package assign

// MinMoves exposes the exhaustive minimum of balance_test.go to the
// external tests (the churn test).
var MinMoves = minMoves
