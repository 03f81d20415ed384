package source

import (
	"fmt"
	"maps"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DropServiceLabel takes the labels of a slice away when the Service's
// name is the only one, and keeps every label of any other slice.
func TestDropServiceLabel(t *testing.T) {
	for _, tt := range []struct {
		labels      map[string]string
		wantService string
		wantDropped bool
	}{
		{map[string]string{discoveryv1.LabelServiceName: "web"}, "web", true},
		{map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "x"}, "web", false},
		{map[string]string{"team": "a"}, "", false},
		{map[string]string{discoveryv1.LabelServiceName: ""}, "", false},
		{nil, "", false},
	} {
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(tt.labels)}}
		service, dropped := DropServiceLabel(slice)
		if service != tt.wantService || dropped != tt.wantDropped {
			t.Errorf("labels %v: %q, %v; want %q, %v", tt.labels, service, dropped, tt.wantService, tt.wantDropped)
		}
		if want := tt.labels; tt.wantDropped && slice.Labels != nil || !tt.wantDropped && !maps.Equal(slice.Labels, want) {
			t.Errorf("labels %v: left %v", tt.labels, slice.Labels)
		}
	}
}

// An edit of SliceServices leaves the one it started from as it was,
// shares the shards it did not change, and takes out what it is told
// to: an index whose slices all went holds nothing.
func TestSliceServicesEdit(t *testing.T) {
	list := make([]*discoveryv1.EndpointSlice, 1000)
	e := NewSliceServicesEdit(SliceServices{})
	for i := range list {
		list[i] = &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i)}}
		e.Set(list[i], fmt.Sprint("svc-", i))
	}
	first := e.Done()
	if first.Len() != len(list) || first.Of(list[7]) != "svc-7" {
		t.Fatalf("first: %d slices, list[7]'s %q", first.Len(), first.Of(list[7]))
	}
	e = NewSliceServicesEdit(first)
	e.Set(list[7], "moved")
	e.Set(list[8], "")
	second := e.Done()
	if first.Of(list[7]) != "svc-7" || first.Of(list[8]) != "svc-8" || first.Len() != len(list) {
		t.Errorf("the edit changed the SliceServices it started from")
	}
	if second.Of(list[7]) != "moved" || second.Of(list[8]) != "" || second.Len() != len(list)-1 {
		t.Errorf("second: list[7]'s %q, list[8]'s %q, %d slices", second.Of(list[7]), second.Of(list[8]), second.Len())
	}
	shared := 0
	for i := range SliceShards {
		if fmt.Sprintf("%p", first.shards[i]) == fmt.Sprintf("%p", second.shards[i]) {
			shared++
		}
	}
	if shared < SliceShards-2 {
		t.Errorf("%d of %d shards shared after an edit of two slices", shared, SliceShards)
	}
	e = NewSliceServicesEdit(second)
	for _, slice := range list {
		e.Set(slice, "")
	}
	if empty := e.Done(); empty.Len() != 0 || empty.shards != nil {
		t.Errorf("every slice taken out: %d left", empty.Len())
	}
}
