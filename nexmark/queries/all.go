package queries

// Lookup returns the query named name ("q3").
func Lookup(name string) (Query, bool) {
	for _, q := range All() {
		if q.Name == name {
			return q, true
		}
	}
	return Query{}, false
}
