package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// taskProtocol is the group protocol name of taskBalancer. Every member of
// a group must offer it; the plan's format evolves through the version in
// the member user data, not through this name.
const taskProtocol = "eddy-tasks"

// taskBalancer assigns tasks, not partitions: partition p of every source
// of one sub-topology goes to one member, because the task that reads them
// is one unit of state (its stores and changelog partitions). Kafka's
// assignors place each topic's partitions on their own and would split a
// two-source task between members.
//
// The plan is
//   - even: members own the same number of tasks, give or take one, and a
//     sub-topology's tasks spread over the members as evenly as that allows;
//   - sticky: a member keeps the tasks it owned (as its user data claims;
//     the claim of the highest generation wins) up to its share of the
//     total and of each sub-topology, so a join or leave moves few tasks: a
//     task that moves is restored from its changelog on its new owner;
//   - cooperative (KIP-429): a task that moves is first revoked from its
//     owner while every other task keeps running, and assigned in the
//     rebalance that follows the revoke. franz-go runs the cooperative
//     protocol (revoke only what moved, then rejoin) for any balancer whose
//     IsCooperative returns true; the balancer's part is to advertise the
//     owned partitions and to keep a partition out of the plan until its
//     owner revoked it, which BalancePlan.AdjustCooperative does.
//     keepWholeTasks then makes sure that step never leaves part of a task
//     on a member.
//
// Standby replicas and lag-aware placement (issue 4) extend memberInfo
// (user data) and assignTasks; the protocol stays.
type taskBalancer struct{ plan *plan }

func newTaskBalancer(p *plan) *taskBalancer { return &taskBalancer{plan: p} }

func (*taskBalancer) ProtocolName() string { return taskProtocol }
func (*taskBalancer) IsCooperative() bool  { return true }

func (b *taskBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	// Owned partitions are what AdjustCooperative reads (and what a
	// cooperative member revokes against); the user data says the same
	// in tasks, for the balancer.
	topics := make([]string, 0, len(current))
	for topic := range current {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	for _, topic := range topics {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic = topic
		op.Partitions = current[topic]
		meta.OwnedPartitions = append(meta.OwnedPartitions, op)
	}
	meta.UserData = appendMemberInfo(nil, memberInfo{Active: b.plan.tasksOf(current)})
	return meta.AppendTo(nil)
}

func (*taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (b *taskBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// Balance implements kgo.ConsumerBalancerBalance. topics holds the
// partition count of every topic a member subscribes to.
func (b *taskBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	tasks := b.plan.tasks(topics)
	var members []memberState
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		ms := memberState{id: m.MemberID, generation: meta.Generation, eligible: make([]bool, len(b.plan.subs))}
		for i := range b.plan.subs {
			ms.eligible[i] = subscribesAll(meta.Topics, b.plan.subs[i].Sources, topics)
		}
		if info, err := decodeMemberInfo(meta.UserData); err == nil {
			ms.owned = info.Active
		} else {
			// A member of another version, or damaged data: it
			// loses its stickiness, nothing else. AdjustCooperative
			// still keeps its partitions from going to two members.
			ms.owned = nil
		}
		members = append(members, ms)
	})
	assigned := assignTasks(tasks, members)
	p := cb.NewPlan()
	byID := make(map[TaskID]*taskSpec, len(tasks))
	for i := range tasks {
		byID[tasks[i].id] = &tasks[i]
	}
	for i := range members {
		m, _ := cb.MemberAt(i)
		for _, id := range assigned[i] {
			for _, tp := range byID[id].parts {
				p.AddPartition(m, tp.topic, tp.partition)
			}
		}
	}
	p.AdjustCooperative(cb)
	b.plan.keepWholeTasks(p.AsMemberIDMap(), tasks)
	return p
}

// subscribesAll reports whether interests hold every existing source: a
// member runs a task only if it consumes all of the task's partitions
// (a member of another topology version may not).
func subscribesAll(interests, sources []string, topics map[string]int32) bool {
	for _, s := range sources {
		if _, exists := topics[s]; exists && !slices.Contains(interests, s) {
			return false
		}
	}
	return true
}

type topicPartition struct {
	topic     string
	partition int32
}

// taskSpec is a task and its partitions.
type taskSpec struct {
	id    TaskID
	parts []topicPartition
}

// tasks lists every task of the topology given the partition counts: task
// (s, p) for p below the largest partition count of s's sources, made of
// partition p of each source that has it. Sources of one sub-topology have
// the same count (Run checks it at startup); should one grow later, the
// plan still keeps each partition on exactly one member.
func (p *plan) tasks(topics map[string]int32) []taskSpec {
	var out []taskSpec
	for s := range p.subs {
		var n int32
		for _, src := range p.subs[s].Sources {
			n = max(n, topics[src])
		}
		for part := int32(0); part < n; part++ {
			ts := taskSpec{id: TaskID{Subtopology: s, Partition: part}}
			for _, src := range p.subs[s].Sources {
				if part < topics[src] {
					ts.parts = append(ts.parts, topicPartition{src, part})
				}
			}
			out = append(out, ts)
		}
	}
	return out
}

// keepWholeTasks removes from each member's plan every task that the plan
// gives it only in part. AdjustCooperative drops a partition from a member
// while another member still has to revoke it; with whole tasks moving
// that drops whole tasks, but claims left over from an older plan (a
// stale member, another balancer) could split one. The member then gives
// the rest up too, and the next rebalance assigns the task whole: a task
// must never run on two members, each with part of its input.
func (p *plan) keepWholeTasks(memberPlan map[string]map[string][]int32, tasks []taskSpec) {
	size := make(map[TaskID]int, len(tasks))
	for _, t := range tasks {
		size[t.id] = len(t.parts)
	}
	for _, topics := range memberPlan {
		count := make(map[TaskID]int)
		for topic, parts := range topics {
			for _, part := range parts {
				if id, ok := p.taskOf(topic, part); ok {
					count[id]++
				}
			}
		}
		for topic, parts := range topics {
			kept := parts[:0]
			for _, part := range parts {
				id, ok := p.taskOf(topic, part)
				if !ok || count[id] == size[id] {
					kept = append(kept, part)
				}
			}
			if len(kept) == 0 {
				delete(topics, topic)
			} else {
				topics[topic] = kept
			}
		}
	}
}

// memberState is what the balancer knows of one member.
type memberState struct {
	id         string
	generation int32
	// eligible[s] tells whether the member subscribes to sub-topology
	// s's sources.
	eligible []bool
	owned    []TaskID
}

// assignTasks is the plan, as a pure function: assigned[i] are the tasks
// of members[i], sorted. Members come in a stable order (franz-go sorts
// them by instance id, then member id), which makes the plan
// deterministic.
func assignTasks(tasks []taskSpec, members []memberState) [][]TaskID {
	assigned := make([][]TaskID, len(members))
	if len(members) == 0 {
		return assigned
	}
	// A task claimed by several members (one missed a rebalance) belongs
	// to the claim of the highest generation.
	owner := make(map[TaskID]int)
	for i, m := range members {
		for _, id := range m.owned {
			if j, ok := owner[id]; !ok || m.generation > members[j].generation {
				owner[id] = i
			}
		}
	}
	exists := make(map[TaskID]bool, len(tasks))
	subTasks := make(map[int]int)
	for _, t := range tasks {
		exists[t.id] = true
		subTasks[t.id.Subtopology]++
	}
	// subCap[s] is the most tasks of sub-topology s one member keeps:
	// its even share, so that a member that owned many tasks of one
	// sub-topology gives some of those up rather than of another, and the
	// load of each sub-topology spreads as well as the total.
	subCap := make(map[int]int, len(subTasks))
	for s, n := range subTasks {
		eligible := 0
		for _, m := range members {
			if m.eligible[s] {
				eligible++
			}
		}
		if eligible > 0 {
			subCap[s] = (n + eligible - 1) / eligible
		}
	}
	floor, extra := len(tasks)/len(members), len(tasks)%len(members)
	done := make(map[TaskID]bool, len(tasks))
	subCount := make([]map[int]int, len(members))
	for i := range subCount {
		subCount[i] = make(map[int]int)
	}
	give := func(i int, id TaskID) {
		assigned[i] = append(assigned[i], id)
		done[id] = true
		subCount[i][id.Subtopology]++
	}
	// Sticky: each member keeps up to floor of its tasks, then members
	// take one more of theirs while the plan has extra slots. Owned tasks
	// are visited partition first, so what a member keeps mixes its
	// sub-topologies.
	keeps := func(i int, id TaskID) bool {
		return exists[id] && !done[id] && owner[id] == i && members[i].eligible[id.Subtopology] &&
			subCount[i][id.Subtopology] < subCap[id.Subtopology]
	}
	owned := make([][]TaskID, len(members))
	for i := range members {
		owned[i] = slices.Clone(members[i].owned)
		slices.SortFunc(owned[i], func(a, b TaskID) int {
			if a.Partition != b.Partition {
				return int(a.Partition) - int(b.Partition)
			}
			return a.Subtopology - b.Subtopology
		})
	}
	for i := range members {
		for _, id := range owned[i] {
			if len(assigned[i]) < floor && keeps(i, id) {
				give(i, id)
			}
		}
	}
	for i := range members {
		if extra == 0 {
			break
		}
		for _, id := range owned[i] {
			if len(assigned[i]) == floor && keeps(i, id) {
				give(i, id)
				extra--
				break
			}
		}
	}
	// The rest go to the member with the fewest tasks, then the fewest of
	// the task's sub-topology, then the first.
	for _, t := range tasks {
		if done[t.id] {
			continue
		}
		best := -1
		for i := range members {
			if !members[i].eligible[t.id.Subtopology] {
				continue
			}
			if best < 0 || len(assigned[i]) < len(assigned[best]) ||
				len(assigned[i]) == len(assigned[best]) && subCount[i][t.id.Subtopology] < subCount[best][t.id.Subtopology] {
				best = i
			}
		}
		if best >= 0 {
			give(best, t.id)
		}
	}
	for i := range assigned {
		slices.SortFunc(assigned[i], compareTaskIDs)
	}
	return assigned
}

// memberInfo is the user data of a member's subscription. Version 1 holds
// the active tasks. Later versions (standby tasks, restore lags) append
// fields: a reader takes the fields it knows and ignores what follows, so
// members of two versions can share a group during a rolling upgrade.
type memberInfo struct {
	Active []TaskID
}

const memberInfoV1 = 1

var errBadMemberInfo = errors.New("runtime: malformed member user data")

func appendMemberInfo(dst []byte, info memberInfo) []byte {
	dst = append(dst, memberInfoV1)
	dst = binary.AppendUvarint(dst, uint64(len(info.Active)))
	for _, id := range info.Active {
		dst = binary.AppendUvarint(dst, uint64(id.Subtopology))
		dst = binary.AppendUvarint(dst, uint64(id.Partition))
	}
	return dst
}

func decodeMemberInfo(b []byte) (memberInfo, error) {
	var info memberInfo
	if len(b) == 0 || b[0] < memberInfoV1 {
		return info, fmt.Errorf("%w: no version", errBadMemberInfo)
	}
	version := b[0]
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return info, fmt.Errorf("%w: bad task count", errBadMemberInfo)
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		s, k := binary.Uvarint(b)
		if k <= 0 || s > 1<<20 {
			return info, fmt.Errorf("%w: bad sub-topology", errBadMemberInfo)
		}
		b = b[k:]
		p, k := binary.Uvarint(b)
		if k <= 0 || p > 1<<31-1 {
			return info, fmt.Errorf("%w: bad partition", errBadMemberInfo)
		}
		b = b[k:]
		info.Active = append(info.Active, TaskID{Subtopology: int(s), Partition: int32(p)})
	}
	if version == memberInfoV1 && len(b) != 0 {
		return info, fmt.Errorf("%w: trailing bytes", errBadMemberInfo)
	}
	return info, nil
}
