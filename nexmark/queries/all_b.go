package queries

// queriesB are the queries of the second batch (q7, q8, q11, q12), for All
// to list with the first.
func queriesB() []Query { return []Query{q7(), q8(), q11(), q12()} }
