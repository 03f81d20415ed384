package model

import (
	"slices"
	"testing"
)

func TestServedIngresses(t *testing.T) {
	m := Model{
		Default: Server{Locations: []Location{{Path: "/", Ingress: "default/fallback"}}},
		Servers: ListOf(
			&Server{Host: "a.test", Locations: []Location{{Path: "/b", Ingress: "ns/b"}, {Path: "/a", Ingress: "ns/a"}}},
			&Server{Host: "b.test", Locations: []Location{{Path: "/", Ingress: "ns/a"}}},
		),
	}
	want := []string{"default/fallback", "ns/a", "ns/b"}
	if got := m.ServedIngresses(); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
