package model

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A List is written as JSON as its slice would be, and read back into a
// list equal to one ListOf makes of the same items: a Snapshot written by
// the e2e hooks is compared field by field with reflect.DeepEqual.
func TestListJSON(t *testing.T) {
	items := make([]int, 1000)
	for i := range items {
		items[i] = i
	}
	for _, l := range []List[int]{{}, ListOf(1, 2, 3), ListOf(items...)} {
		data, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(l.Slice())
		if string(data) != string(want) {
			t.Fatalf("written %s, want %s", data, want)
		}
		var back List[int]
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, ListOf(l.Slice()...)) {
			t.Fatalf("read back %v, want %v", back.Slice(), l.Slice())
		}
	}
}

// A list whose every item an edit removes is the zero List, as ListOf()
// is: views and snapshots built whole and patched compare equal.
func TestListEditedToEmptyIsZero(t *testing.T) {
	byKey := func(v, key int) int { return v - key }
	got := Edited(ListOf(1, 2), []ListEdit[int, int]{{Key: 1, Remove: true}, {Key: 2, Remove: true}}, byKey)
	if !reflect.DeepEqual(got, List[int]{}) || !reflect.DeepEqual(got, ListOf[int]()) {
		t.Fatalf("a list edited to empty is %#v, want the zero List", got)
	}
}
