package runtime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMemberInfoRoundTrip(t *testing.T) {
	in := memberInfo{
		Active:  []TaskID{{0, 0}, {0, 7}, {3, 1 << 20}},
		Process: "ledger-1",
		Standby: []standbyLag{{TaskID{0, 1}, 0}, {TaskID{1, 2}, 1 << 40}},
	}
	got, err := decodeMemberInfo(appendMemberInfo(nil, in))
	if err != nil || !slices.Equal(got.Active, in.Active) || got.Process != in.Process || !slices.Equal(got.Standby, in.Standby) {
		t.Fatalf("got %+v %v, want %+v", got, err, in)
	}
	// A later version appends fields: this version reads what it knows.
	later := append(appendMemberInfo(nil, in), 0xAA, 0xBB)
	later[0] = memberInfoV3 + 1
	if got, err := decodeMemberInfo(later); err != nil || !slices.Equal(got.Active, in.Active) || !slices.Equal(got.Standby, in.Standby) {
		t.Fatalf("a later version's data: got %+v %v", got, err)
	}
	good := appendMemberInfo(nil, in)
	for name, b := range map[string][]byte{
		"empty":    nil,
		"version":  {0},
		"count":    {memberInfoV2, 100},
		"process":  {memberInfoV2, 0, 200, 'a'},
		"short":    good[:len(good)-1],
		"trailing": append(append([]byte(nil), good...), 1),
	} {
		if _, err := decodeMemberInfo(b); !errors.Is(err, errBadMemberInfo) {
			t.Errorf("%s: got %v, want errBadMemberInfo", name, err)
		}
	}
}

// appendMemberInfoV1 and decodeMemberInfoV1 are the user data of the
// version before standby tasks, as members of that version still write
// and read it during a rolling upgrade.
func appendMemberInfoV1(dst []byte, active []TaskID) []byte {
	return appendTaskIDs(append(dst, memberInfoV1), active)
}

func decodeMemberInfoV1(b []byte) ([]TaskID, error) {
	if len(b) == 0 || b[0] < memberInfoV1 {
		return nil, errBadMemberInfo
	}
	version := b[0]
	ids, rest, err := readTaskIDs(b[1:])
	if err != nil {
		return nil, err
	}
	if version == memberInfoV1 && len(rest) != 0 {
		return nil, errBadMemberInfo
	}
	return ids, nil
}

// TestMemberInfoVersionsInterwork: during a rolling upgrade a version 1
// member and a version 2 leader (or the other way round) read each
// other's active tasks; the version 1 member has no process, so it gets
// no standbys; an assignment without standby data means none.
func TestMemberInfoVersionsInterwork(t *testing.T) {
	active := []TaskID{{0, 1}, {1, 3}}
	got, err := decodeMemberInfo(appendMemberInfoV1(nil, active))
	if err != nil || !slices.Equal(got.Active, active) || got.Process != "" || got.Standby != nil {
		t.Fatalf("version 1 data: got %+v %v", got, err)
	}
	v2 := appendMemberInfo(nil, memberInfo{Active: active, Process: "p", Standby: []standbyLag{{TaskID{0, 0}, 3}}})
	if ids, err := decodeMemberInfoV1(v2); err != nil || !slices.Equal(ids, active) {
		t.Fatalf("a version 1 reader of version 2 data: got %v %v", ids, err)
	}

	p := balancerPlan(t)
	b := newTaskBalancer(p)
	b.replicas = 1
	id1, id2 := "new", "old"
	members := []kmsg.JoinGroupResponseMember{
		{MemberID: id1, InstanceID: &id1, ProtocolMetadata: memberMetadata([]string{"left", "rekey", "right"}, nil, -1, memberInfo{Process: "new"})},
		{MemberID: id2, InstanceID: &id2, ProtocolMetadata: func() []byte {
			meta := kmsg.NewConsumerMemberMetadata()
			meta.Version, meta.Generation = 3, -1
			meta.Topics = []string{"left", "rekey", "right"}
			meta.UserData = appendMemberInfoV1(nil, nil)
			return meta.AppendTo(nil)
		}()},
	}
	mb, _, err := b.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"left": 2, "right": 2, "rekey": 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range into.IntoSyncAssignment() {
		var ma kmsg.ConsumerMemberAssignment
		if err := ma.ReadFrom(a.MemberAssignment); err != nil {
			t.Fatal(err)
		}
		info, err := decodeAssignmentInfo(ma.UserData)
		if err != nil {
			t.Fatal(err)
		}
		standby := info.Standby
		if a.MemberID == id2 && len(standby) > 0 {
			t.Fatalf("the version 1 member got standbys %v", standby)
		}
		if a.MemberID == id1 && len(standby) != 2 {
			// The old member runs 2 of the 4 stateful tasks; the new
			// one is the only process left to keep their standbys.
			t.Fatalf("the version 2 member got standbys %v, want the old member's 2 tasks", standby)
		}
	}
}

func TestAssignmentInfoRoundTrip(t *testing.T) {
	in := assignmentInfo{
		Standby: []TaskID{{0, 3}, {2, 0}},
		Routes: &Routes{
			Partitions: []int32{4, 0, 2},
			Hosts: []HostTasks{
				{Endpoint: "10.0.0.1:8080", Active: []TaskID{{0, 0}, {0, 1}, {2, 1}}, Standby: []TaskID{{0, 2}}},
				{Endpoint: "[::1]:9", Active: []TaskID{{0, 2}, {0, 3}, {2, 0}}},
			},
		},
	}
	same := func(a, b assignmentInfo) bool {
		if !slices.Equal(a.Standby, b.Standby) || (a.Routes == nil) != (b.Routes == nil) {
			return false
		}
		if a.Routes == nil {
			return true
		}
		return slices.Equal(a.Routes.Partitions, b.Routes.Partitions) &&
			slices.EqualFunc(a.Routes.Hosts, b.Routes.Hosts, func(x, y HostTasks) bool {
				return x.Endpoint == y.Endpoint && slices.Equal(x.Active, y.Active) && slices.Equal(x.Standby, y.Standby)
			})
	}
	got, err := decodeAssignmentInfo(appendAssignmentInfo(nil, in))
	if err != nil || !same(got, in) {
		t.Fatalf("got %+v %v", got, err)
	}
	if ep, ok := got.Routes.Owner(TaskID{2, 0}); !ok || ep != "[::1]:9" {
		t.Fatalf("owner of 2_0: %q %v", ep, ok)
	}
	if _, ok := got.Routes.Owner(TaskID{1, 0}); ok {
		t.Fatal("2_0 has an owner, but no host runs it")
	}
	if got, err := decodeAssignmentInfo(nil); err != nil || got.Standby != nil || got.Routes != nil {
		t.Fatalf("no user data: got %+v %v, want no standbys and no routes", got, err)
	}
	// A version 1 leader's data: standbys, no routes.
	v1 := appendTaskIDs([]byte{assignmentInfoV1}, in.Standby)
	if got, err := decodeAssignmentInfo(v1); err != nil || !slices.Equal(got.Standby, in.Standby) || got.Routes != nil {
		t.Fatalf("version 1 data: got %+v %v", got, err)
	}
	// A version 1 member reads the standbys of version 2 data, which
	// starts as version 1 did and says a later version.
	v2 := appendAssignmentInfo(nil, in)
	if ids, rest, err := readTaskIDs(v2[1:]); err != nil || v2[0] <= assignmentInfoV1 || !slices.Equal(ids, in.Standby) || len(rest) == 0 {
		t.Fatalf("a version 1 reader of version 2 data: %v %v", ids, err)
	}
	later := append(appendAssignmentInfo(nil, in), 9)
	later[0]++
	if got, err := decodeAssignmentInfo(later); err != nil || !same(got, in) {
		t.Fatalf("a later version: got %+v %v", got, err)
	}
	good := appendAssignmentInfo(nil, in)
	for name, b := range map[string][]byte{
		"version":    {0},
		"trailing":   append(append([]byte(nil), good...), 9),
		"short":      good[:len(good)-1],
		"subs":       {assignmentInfoV2, 0, 200},
		"hosts":      {assignmentInfoV2, 0, 0, 100},
		"endpoint":   {assignmentInfoV2, 0, 0, 1, 50, 'a'},
		"host tasks": {assignmentInfoV2, 0, 0, 1, 1, 'a', 9},
		"partitions": {assignmentInfoV2, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x7f},
	} {
		if _, err := decodeAssignmentInfo(b); !errors.Is(err, errBadMemberInfo) {
			t.Errorf("%s: got %v, want errBadMemberInfo", name, err)
		}
	}
}

// appendMemberInfoV2 is the user data of the version before endpoints.
func appendMemberInfoV2(dst []byte, info memberInfo) []byte {
	dst = append(dst, memberInfoV2)
	dst = appendTaskIDs(dst, info.Active)
	dst = appendString(dst, info.Process)
	dst = binary.AppendUvarint(dst, uint64(len(info.Standby)))
	for _, s := range info.Standby {
		dst = appendTaskID(dst, s.Task)
		dst = binary.AppendUvarint(dst, uint64(s.Lag))
	}
	return dst
}

// TestMemberInfoV3 checks the endpoint and that versions 2 and 3 read
// each other: a version 2 member has no endpoint (its tasks get no
// route), a version 2 reader takes what it knows of version 3 data.
func TestMemberInfoV3(t *testing.T) {
	in := memberInfo{Active: []TaskID{{0, 1}}, Process: "p", Standby: []standbyLag{{TaskID{1, 0}, 5}}, Endpoint: "127.0.0.1:8080"}
	b := appendMemberInfo(nil, in)
	if b[0] != memberInfoV3 {
		t.Fatalf("version %d, want %d", b[0], memberInfoV3)
	}
	got, err := decodeMemberInfo(b)
	if err != nil || got.Endpoint != in.Endpoint || got.Process != in.Process || !slices.Equal(got.Standby, in.Standby) {
		t.Fatalf("got %+v %v", got, err)
	}
	got, err = decodeMemberInfo(appendMemberInfoV2(nil, in))
	if err != nil || got.Endpoint != "" || got.Process != "p" || !slices.Equal(got.Active, in.Active) || !slices.Equal(got.Standby, in.Standby) {
		t.Fatalf("version 2 data: got %+v %v", got, err)
	}
	// What a version 2 reader does: the fields of version 2, the rest
	// ignored because the version is later.
	v2 := appendMemberInfoV2(nil, in)
	if !bytes.Equal(b[1:len(v2)], v2[1:]) {
		t.Fatal("version 3 data does not start with the fields of version 2")
	}
	long := in
	long.Endpoint = strings.Repeat("h", maxProcessLen+1)
	if _, err := decodeMemberInfo(appendMemberInfo(nil, long)); !errors.Is(err, errBadMemberInfo) {
		t.Fatalf("an endpoint past the bound: got %v", err)
	}
}

// TestBalanceRoutes: the leader's assignment gives every member the
// routes of the plan: each endpoint with the tasks of its members (two
// workers of one process share one), the task counts, and no route for a
// member without an endpoint.
func TestBalanceRoutes(t *testing.T) {
	p := balancerPlan(t)
	b := newTaskBalancer(p)
	topics := []string{"left", "rekey", "right"}
	ids := []string{"a-w0", "a-w1", "b", "c"}
	endpoints := map[string]string{"a-w0": "a:1", "a-w1": "a:1", "b": "b:2", "c": ""}
	var members []kmsg.JoinGroupResponseMember
	for _, id := range ids {
		members = append(members, kmsg.JoinGroupResponseMember{MemberID: id, InstanceID: &id,
			ProtocolMetadata: memberMetadata(topics, nil, -1, memberInfo{Process: id, Endpoint: endpoints[id]})})
	}
	mb, _, err := b.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"left": 3, "right": 3, "rekey": 3})
	if err != nil {
		t.Fatal(err)
	}
	plans := map[string][]TaskID{}
	var routes []*Routes
	for _, a := range into.IntoSyncAssignment() {
		var ma kmsg.ConsumerMemberAssignment
		if err := ma.ReadFrom(a.MemberAssignment); err != nil {
			t.Fatal(err)
		}
		parts := map[string][]int32{}
		for _, tp := range ma.Topics {
			parts[tp.Topic] = tp.Partitions
		}
		plans[a.MemberID] = p.tasksOf(parts)
		info, err := decodeAssignmentInfo(ma.UserData)
		if err != nil || info.Routes == nil {
			t.Fatalf("%s: routes %v %v", a.MemberID, info.Routes, err)
		}
		routes = append(routes, info.Routes)
	}
	if len(routes) != len(ids) {
		t.Fatalf("%d assignments, want %d", len(routes), len(ids))
	}
	r := routes[0]
	if !slices.Equal(r.Partitions, []int32{3, 3}) {
		t.Fatalf("partitions %v, want 3 tasks in each of the 2 sub-topologies", r.Partitions)
	}
	if eps := r.Endpoints(); !slices.Equal(eps, []string{"a:1", "b:2"}) {
		t.Fatalf("endpoints %v", eps)
	}
	want := map[string][]TaskID{"a:1": append(slices.Clone(plans["a-w0"]), plans["a-w1"]...), "b:2": plans["b"]}
	for _, h := range r.Hosts {
		w := want[h.Endpoint]
		slices.SortFunc(w, compareTaskIDs)
		if !slices.Equal(h.Active, w) {
			t.Errorf("%s: active %v, want %v", h.Endpoint, h.Active, w)
		}
	}
	for _, id := range plans["c"] {
		if ep, ok := r.Owner(id); ok {
			t.Errorf("task %s of the member without an endpoint routes to %s", id, ep)
		}
	}
	for _, id := range plans["b"] {
		if ep, ok := r.Owner(id); !ok || ep != "b:2" {
			t.Errorf("task %s routes to %q, want b:2", id, ep)
		}
	}
	for _, other := range routes[1:] {
		if !slices.Equal(other.Endpoints(), r.Endpoints()) {
			t.Errorf("members got different routes: %v and %v", other.Endpoints(), r.Endpoints())
		}
	}
}

func FuzzDecodeMemberInfo(f *testing.F) {
	f.Add(appendMemberInfo(nil, memberInfo{Active: []TaskID{{1, 2}}, Process: "p", Standby: []standbyLag{{TaskID{0, 1}, 7}}}))
	f.Add(appendMemberInfoV1(nil, []TaskID{{1, 2}}))
	f.Add(appendMemberInfoV2(nil, memberInfo{Active: []TaskID{{1, 2}}, Process: "p"}))
	f.Add(appendMemberInfo(nil, memberInfo{Process: "p", Endpoint: "h:1"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := decodeMemberInfo(b)
		if err != nil {
			return
		}
		again, err := decodeMemberInfo(appendMemberInfo(nil, info))
		if err != nil || !slices.Equal(again.Active, info.Active) || again.Process != info.Process || !slices.Equal(again.Standby, info.Standby) || again.Endpoint != info.Endpoint {
			t.Fatalf("re-encoding %+v: %+v %v", info, again, err)
		}
	})
}

func FuzzDecodeAssignmentInfo(f *testing.F) {
	f.Add(appendAssignmentInfo(nil, assignmentInfo{Standby: []TaskID{{0, 1}}}))
	f.Add(appendAssignmentInfo(nil, assignmentInfo{Routes: &Routes{Partitions: []int32{2}, Hosts: []HostTasks{{Endpoint: "h:1", Active: []TaskID{{0, 0}}}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := decodeAssignmentInfo(b)
		if err != nil || info.Routes == nil {
			return
		}
		again, err := decodeAssignmentInfo(appendAssignmentInfo(nil, info))
		if err != nil || again.Routes == nil || !slices.Equal(again.Routes.Partitions, info.Routes.Partitions) || len(again.Routes.Hosts) != len(info.Routes.Hosts) {
			t.Fatalf("re-encoding %+v: %+v %v", info, again, err)
		}
	})
}
