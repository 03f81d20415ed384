package model

import "encoding/json"

// A List is written as JSON as the slice of its items would be (null for
// none), and read back from one: a Snapshot is written so by the e2e hooks
// (package snapshot) and read back by the e2e tests.

// MarshalJSON writes the items as a JSON array, null for none.
func (l List[T]) MarshalJSON() ([]byte, error) {
	return json.Marshal(l.Slice())
}

// UnmarshalJSON reads the items from a JSON array (or null: none).
func (l *List[T]) UnmarshalJSON(data []byte) error {
	var items []T
	if err := json.Unmarshal(data, &items); err != nil {
		return err
	}
	*l = ListOf(items...)
	return nil
}
