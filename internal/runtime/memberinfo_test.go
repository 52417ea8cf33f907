package runtime

import (
	"errors"
	"slices"
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
	later[0] = memberInfoV2 + 1
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
		standby, err := decodeAssignmentInfo(ma.UserData)
		if err != nil {
			t.Fatal(err)
		}
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
	in := []TaskID{{0, 3}, {2, 0}}
	got, err := decodeAssignmentInfo(appendAssignmentInfo(nil, in))
	if err != nil || !slices.Equal(got, in) {
		t.Fatalf("got %v %v", got, err)
	}
	if got, err := decodeAssignmentInfo(nil); err != nil || got != nil {
		t.Fatalf("no user data: got %v %v, want no standbys", got, err)
	}
	later := append(appendAssignmentInfo(nil, in), 9)
	later[0]++
	if got, err := decodeAssignmentInfo(later); err != nil || !slices.Equal(got, in) {
		t.Fatalf("a later version: got %v %v", got, err)
	}
	if _, err := decodeAssignmentInfo(append(appendAssignmentInfo(nil, in), 9)); !errors.Is(err, errBadMemberInfo) {
		t.Fatalf("trailing bytes: got %v", err)
	}
}

func FuzzDecodeMemberInfo(f *testing.F) {
	f.Add(appendMemberInfo(nil, memberInfo{Active: []TaskID{{1, 2}}, Process: "p", Standby: []standbyLag{{TaskID{0, 1}, 7}}}))
	f.Add(appendMemberInfoV1(nil, []TaskID{{1, 2}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := decodeMemberInfo(b)
		if err != nil {
			return
		}
		again, err := decodeMemberInfo(appendMemberInfo(nil, info))
		if err != nil || !slices.Equal(again.Active, info.Active) || again.Process != info.Process || !slices.Equal(again.Standby, info.Standby) {
			t.Fatalf("re-encoding %+v: %+v %v", info, again, err)
		}
	})
}
