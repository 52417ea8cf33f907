package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// memberInfo is the user data of a member's subscription. Version 1 holds
// the active tasks; version 2 adds the member's process (instance id) and
// the standby tasks the process keeps, each with its changelog lag. Later
// versions append fields: a reader takes the fields it knows and ignores
// what follows, so members of two versions can share a group during a
// rolling upgrade (a version 1 member reads a version 2 member's active
// tasks; a version 2 leader gives a version 1 member no standbys).
type memberInfo struct {
	Active  []TaskID
	Process string
	Standby []standbyLag
}

// standbyLag is a standby task and how many changelog offsets (summed over
// its stores) it was behind the last stable offsets at its last catch-up.
type standbyLag struct {
	Task TaskID
	Lag  int64
}

const (
	memberInfoV1 = 1
	memberInfoV2 = 2
	// maxProcessLen bounds the process name a decoder accepts: an
	// instance id is at most 200 characters (ValidName).
	maxProcessLen = 1 << 10
)

var errBadMemberInfo = errors.New("runtime: malformed member user data")

func appendMemberInfo(dst []byte, info memberInfo) []byte {
	dst = append(dst, memberInfoV2)
	dst = appendTaskIDs(dst, info.Active)
	dst = binary.AppendUvarint(dst, uint64(len(info.Process)))
	dst = append(dst, info.Process...)
	dst = binary.AppendUvarint(dst, uint64(len(info.Standby)))
	for _, s := range info.Standby {
		dst = appendTaskID(dst, s.Task)
		dst = binary.AppendUvarint(dst, uint64(max(s.Lag, 0)))
	}
	return dst
}

func decodeMemberInfo(b []byte) (memberInfo, error) {
	var info memberInfo
	if len(b) == 0 || b[0] < memberInfoV1 {
		return info, fmt.Errorf("%w: no version", errBadMemberInfo)
	}
	version := b[0]
	var err error
	if info.Active, b, err = readTaskIDs(b[1:]); err != nil {
		return info, err
	}
	if version >= memberInfoV2 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > maxProcessLen || n > uint64(len(b)-k) {
			return info, fmt.Errorf("%w: bad process", errBadMemberInfo)
		}
		info.Process, b = string(b[k:k+int(n)]), b[k+int(n):]
		n, k = binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			return info, fmt.Errorf("%w: bad standby count", errBadMemberInfo)
		}
		b = b[k:]
		for i := uint64(0); i < n; i++ {
			var s standbyLag
			if s.Task, b, err = readTaskID(b); err != nil {
				return info, err
			}
			lag, k := binary.Uvarint(b)
			if k <= 0 || lag > math.MaxInt64 {
				return info, fmt.Errorf("%w: bad lag", errBadMemberInfo)
			}
			s.Lag, b = int64(lag), b[k:]
			info.Standby = append(info.Standby, s)
		}
	}
	if version <= memberInfoV2 && len(b) != 0 {
		return info, fmt.Errorf("%w: trailing bytes", errBadMemberInfo)
	}
	return info, nil
}

// The user data of a member's assignment: version 1 is the member's
// standby tasks. Later versions may append fields.
const assignmentInfoV1 = 1

func appendAssignmentInfo(dst []byte, standby []TaskID) []byte {
	return appendTaskIDs(append(dst, assignmentInfoV1), standby)
}

// decodeAssignmentInfo returns the standby tasks of an assignment's user
// data; none for empty data (a leader that places no standbys).
func decodeAssignmentInfo(b []byte) ([]TaskID, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] < assignmentInfoV1 {
		return nil, fmt.Errorf("%w: no version", errBadMemberInfo)
	}
	version := b[0]
	ids, rest, err := readTaskIDs(b[1:])
	if err != nil {
		return nil, err
	}
	if version == assignmentInfoV1 && len(rest) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", errBadMemberInfo)
	}
	return ids, nil
}

// appendTaskIDs encodes a count (uvarint) and each task's sub-topology and
// partition (uvarints).
func appendTaskIDs(dst []byte, ids []TaskID) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		dst = appendTaskID(dst, id)
	}
	return dst
}

func appendTaskID(dst []byte, id TaskID) []byte {
	dst = binary.AppendUvarint(dst, uint64(id.Subtopology))
	return binary.AppendUvarint(dst, uint64(id.Partition))
}

func readTaskIDs(b []byte) ([]TaskID, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, b, fmt.Errorf("%w: bad task count", errBadMemberInfo)
	}
	b = b[k:]
	var ids []TaskID
	for i := uint64(0); i < n; i++ {
		var id TaskID
		var err error
		if id, b, err = readTaskID(b); err != nil {
			return nil, b, err
		}
		ids = append(ids, id)
	}
	return ids, b, nil
}

func readTaskID(b []byte) (TaskID, []byte, error) {
	s, k := binary.Uvarint(b)
	if k <= 0 || s > 1<<20 {
		return TaskID{}, b, fmt.Errorf("%w: bad sub-topology", errBadMemberInfo)
	}
	b = b[k:]
	p, k := binary.Uvarint(b)
	if k <= 0 || p > 1<<31-1 {
		return TaskID{}, b, fmt.Errorf("%w: bad partition", errBadMemberInfo)
	}
	return TaskID{Subtopology: int(s), Partition: int32(p)}, b[k:], nil
}
