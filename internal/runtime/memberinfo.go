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
// Version 3 adds the endpoint (host:port) where the member's instance
// serves interactive queries, which the leader passes on to every member
// in the assignments' routes.
type memberInfo struct {
	Active   []TaskID
	Process  string
	Standby  []standbyLag
	Endpoint string
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
	memberInfoV3 = 3
	// maxProcessLen bounds the process name a decoder accepts: an
	// instance id is at most 200 characters (ValidName). It bounds an
	// endpoint too (a host name is at most 253 characters).
	maxProcessLen = 1 << 10
)

var errBadMemberInfo = errors.New("eddy: malformed member user data")

func appendMemberInfo(dst []byte, info memberInfo) []byte {
	dst = append(dst, memberInfoV3)
	dst = appendTaskIDs(dst, info.Active)
	dst = appendString(dst, info.Process)
	dst = binary.AppendUvarint(dst, uint64(len(info.Standby)))
	for _, s := range info.Standby {
		dst = appendTaskID(dst, s.Task)
		dst = binary.AppendUvarint(dst, uint64(max(s.Lag, 0)))
	}
	return appendString(dst, info.Endpoint)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// readString reads what appendString wrote, at most maxProcessLen bytes.
func readString(b []byte, what string) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxProcessLen || n > uint64(len(b)-k) {
		return "", b, fmt.Errorf("%w: bad %s", errBadMemberInfo, what)
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
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
		if info.Process, b, err = readString(b, "process"); err != nil {
			return info, err
		}
		n, k := binary.Uvarint(b)
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
	if version >= memberInfoV3 {
		if info.Endpoint, b, err = readString(b, "endpoint"); err != nil {
			return info, err
		}
	}
	if version <= memberInfoV3 && len(b) != 0 {
		return info, fmt.Errorf("%w: trailing bytes", errBadMemberInfo)
	}
	return info, nil
}

// The user data of a member's assignment: version 1 is the member's
// standby tasks; version 2 appends the group's routes (see Routes): the
// task count of each sub-topology, then each endpoint with its active and
// standby tasks. Later versions may append fields.
const (
	assignmentInfoV1 = 1
	assignmentInfoV2 = 2
)

// assignmentInfo is what an assignment's user data carries.
type assignmentInfo struct {
	Standby []TaskID
	// Routes is nil in data of version 1.
	Routes *Routes
}

func appendAssignmentInfo(dst []byte, a assignmentInfo) []byte {
	dst = appendTaskIDs(append(dst, assignmentInfoV2), a.Standby)
	r := a.Routes
	if r == nil {
		r = &Routes{}
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Partitions)))
	for _, n := range r.Partitions {
		dst = binary.AppendUvarint(dst, uint64(max(n, 0)))
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Hosts)))
	for _, h := range r.Hosts {
		dst = appendString(dst, h.Endpoint)
		dst = appendTaskIDs(dst, h.Active)
		dst = appendTaskIDs(dst, h.Standby)
	}
	return dst
}

// decodeAssignmentInfo returns the standby tasks and routes of an
// assignment's user data; none for empty data (a leader of a version that
// places no standbys).
func decodeAssignmentInfo(b []byte) (assignmentInfo, error) {
	var a assignmentInfo
	if len(b) == 0 {
		return a, nil
	}
	if b[0] < assignmentInfoV1 {
		return a, fmt.Errorf("%w: no version", errBadMemberInfo)
	}
	version := b[0]
	var err error
	if a.Standby, b, err = readTaskIDs(b[1:]); err != nil {
		return a, err
	}
	if version >= assignmentInfoV2 {
		r := &Routes{}
		n, k := binary.Uvarint(b)
		if k <= 0 || n > maxSubtopologies || n > uint64(len(b)-k) {
			return a, fmt.Errorf("%w: bad sub-topology count", errBadMemberInfo)
		}
		b = b[k:]
		for i := uint64(0); i < n; i++ {
			p, k := binary.Uvarint(b)
			if k <= 0 || p > 1<<31-1 {
				return a, fmt.Errorf("%w: bad partition count", errBadMemberInfo)
			}
			r.Partitions, b = append(r.Partitions, int32(p)), b[k:]
		}
		n, k = binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return a, fmt.Errorf("%w: bad host count", errBadMemberInfo)
		}
		b = b[k:]
		for i := uint64(0); i < n; i++ {
			var h HostTasks
			if h.Endpoint, b, err = readString(b, "endpoint"); err != nil {
				return a, err
			}
			if h.Active, b, err = readTaskIDs(b); err != nil {
				return a, err
			}
			if h.Standby, b, err = readTaskIDs(b); err != nil {
				return a, err
			}
			r.Hosts = append(r.Hosts, h)
		}
		a.Routes = r
	}
	if version <= assignmentInfoV2 && len(b) != 0 {
		return a, fmt.Errorf("%w: trailing bytes", errBadMemberInfo)
	}
	return a, nil
}

// maxSubtopologies bounds the sub-topology numbers a decoder accepts.
const maxSubtopologies = 1 << 20

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
	if k <= 0 || s > maxSubtopologies {
		return TaskID{}, b, fmt.Errorf("%w: bad sub-topology", errBadMemberInfo)
	}
	b = b[k:]
	p, k := binary.Uvarint(b)
	if k <= 0 || p > 1<<31-1 {
		return TaskID{}, b, fmt.Errorf("%w: bad partition", errBadMemberInfo)
	}
	return TaskID{Subtopology: int(s), Partition: int32(p)}, b[k:], nil
}
