package runtime

import (
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
// Standby replicas (docs/design.md §4) ride on the same protocol: a member's
// user data carries its process and the lag of every standby task the
// process keeps (memberInfo), the leader places standbys (assignStandbys),
// and each member's assignment carries its standby tasks in its user data.
// With standbys the plan is also lag-aware (assignTasks), availability
// first as in Kafka Streams' KIP-441: a task whose owner is gone goes to
// the member with a caught-up standby of it, and a task that would move
// for balance waits on its owner until its standby on the new member
// caught up; the leader then asks for probing rebalances until the plan
// is even again (members report lags only when they join).
type taskBalancer struct {
	plan *plan
	// process names the member's instance: members of one process share
	// its task directories, so a standby there is a standby for all of
	// them. Empty for a balancer that keeps no standbys (tests).
	process string
	// member is this worker's member key for host.
	member string
	// replicas is the number of standby copies per task this balancer
	// places when it leads the group.
	replicas int
	// host keeps the process's standby tasks: it reports their lags for
	// JoinGroupMetadata and takes this member's standby assignment. Nil
	// in tests that drive the balancer alone.
	host standbyHost
	// probe, when set, asks for a rebalance a while after this member,
	// as leader, made a plan that is not settled.
	probe func()
	// endpoint is the query endpoint this member advertises.
	endpoint string
	// routes, when set, receives the group's routes from each
	// assignment.
	routes routeSink
	// onAssign, when set, receives the member's active tasks at every
	// sync (the worker's status board).
	onAssign func([]TaskID)
}

// routeSink takes the routes an assignment carries.
type routeSink interface{ setRoutes(*Routes) }

// standbyHost is what the balancer needs of the process's standby tasks.
type standbyHost interface {
	// lags returns the process's standby tasks and their changelog lags.
	lags() []standbyLag
	// assign replaces the standby and active tasks of member (a worker).
	assign(member string, standby, active []TaskID)
}

func newTaskBalancer(p *plan) *taskBalancer { return &taskBalancer{plan: p} }

func (*taskBalancer) ProtocolName() string { return taskProtocol }
func (*taskBalancer) IsCooperative() bool  { return true }

// JoinGroupMetadata is called for every JoinGroup, so the standby lags
// the leader sees are as fresh as the members' last catch-up round.
func (b *taskBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	info := memberInfo{Active: b.plan.tasksOf(current), Process: b.process, Endpoint: b.endpoint}
	if b.host != nil {
		info.Standby = b.host.lags()
	}
	return memberMetadata(interests, current, generation, info)
}

// memberMetadata is the consumer protocol's member metadata with info as
// its user data.
func memberMetadata(interests []string, current map[string][]int32, generation int32, info memberInfo) []byte {
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
	meta.UserData = appendMemberInfo(nil, info)
	return meta.AppendTo(nil)
}

// ParseSyncAssignment returns the member's partitions and hands its
// standby tasks, from the assignment's user data, to the host. An
// assignment without them (a leader of an older version) means none.
func (b *taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("eddy: sync assignment parse failed: %w", err)
	}
	parts := make(map[string][]int32, len(a.Topics))
	for _, t := range a.Topics {
		parts[t.Topic] = t.Partitions
	}
	// Damaged user data costs only the standbys and routes: the active
	// tasks, which exactly-once depends on, are in the partitions.
	info, _ := decodeAssignmentInfo(a.UserData)
	if b.host != nil {
		b.host.assign(b.member, info.Standby, b.plan.tasksOf(parts))
	}
	if b.routes != nil {
		// A leader of an older version sends none: queries then find
		// no route until it is upgraded.
		b.routes.setRoutes(info.Routes)
	}
	if b.onAssign != nil {
		b.onAssign(b.plan.tasksOf(parts))
	}
	return parts, nil
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
			ms.owned, ms.process, ms.endpoint = info.Active, info.Process, info.Endpoint
			if len(info.Standby) > 0 {
				ms.standby = make(map[TaskID]int64, len(info.Standby))
				for _, s := range info.Standby {
					ms.standby[s.Task] = s.Lag
				}
			}
		}
		// A member of another version, or with damaged data, loses its
		// stickiness and its standbys, nothing else: AdjustCooperative
		// still keeps its partitions from going to two members. Without
		// a process it is a process of its own that keeps no standbys.
		ms.capable = ms.process != ""
		if !ms.capable {
			ms.process = "member:" + m.MemberID
		}
		members = append(members, ms)
	})
	lagAware := b.replicas > 0
	tp := assignTasks(tasks, members, lagAware)
	assigned := tp.assigned
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
	final := p.AsMemberIDMap()
	b.plan.keepWholeTasks(final, tasks)
	// Standbys are placed against the plan as it goes out: a task held
	// back for a cooperative revoke runs nowhere new yet, and a standby
	// of it on its next owner keeps following the changelog until then.
	active := make([][]TaskID, len(members))
	for i := range members {
		active[i] = b.plan.tasksOf(final[members[i].id])
	}
	standby := assignStandbys(tasks, members, active, b.replicas, tp.warmups)
	out := &taskPlan{BalancePlan: p, standby: make(map[string][]TaskID), routes: buildRoutes(tasks, members, active, standby)}
	for i := range members {
		if len(standby[i]) > 0 {
			out.standby[members[i].id] = standby[i]
		}
	}
	if !tp.settled && lagAware && b.probe != nil {
		// Members report their standby lags only when they join: a
		// probing rebalance is how the plan learns that a warmup caught
		// up (or that an uneven plan can even out).
		b.probe()
	}
	return out
}

// taskPlan is the balance plan with each member's standby tasks, which
// travel in the user data of its assignment.
type taskPlan struct {
	*kgo.BalancePlan
	standby map[string][]TaskID
	// routes go to every member: where each task runs.
	routes *Routes
}

func (p *taskPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := p.BalancePlan.IntoSyncAssignment()
	for i := range out {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(out[i].MemberAssignment); err != nil {
			continue // franz-go encoded it; it reads back
		}
		a.UserData = appendAssignmentInfo(nil, assignmentInfo{Standby: p.standby[out[i].MemberID], Routes: p.routes})
		out[i].MemberAssignment = a.AppendTo(nil)
	}
	return out
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

// taskSpec is a task and its partitions; stateful tasks have stores,
// and so standby copies.
type taskSpec struct {
	id       TaskID
	parts    []topicPartition
	stateful bool
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
			ts := taskSpec{id: TaskID{Subtopology: s, Partition: part}, stateful: len(p.subs[s].storeNames) > 0}
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
	// process is the member's instance; capable is false for a member
	// that keeps no standbys (another version), whose process is then
	// its own. standby are the lags of the standby tasks of its process.
	process string
	capable bool
	standby map[TaskID]int64
	// endpoint is where the member's instance serves queries ("": none).
	endpoint string
}

// assignTasks is the plan, as a pure function. Members come in a stable
// order (franz-go sorts them by instance id, then member id), which makes
// the plan deterministic. lagAware turns on the standby-aware choices
// described below (the leader places standbys).
func assignTasks(tasks []taskSpec, members []memberState, lagAware bool) taskAssignment {
	assigned := make([][]TaskID, len(members))
	if len(members) == 0 {
		return taskAssignment{assigned: assigned, settled: true}
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
	caughtUp := func(i int, id TaskID) bool {
		lag, ok := members[i].standby[id]
		return ok && lag <= acceptableRecoveryLag
	}
	// Lag-aware, a member keeps first the tasks that no other process
	// keeps a caught-up standby of: what it gives up can then move warm
	// (without such a standby it would wait for a warmup).
	warmElsewhere := func(i int, id TaskID) bool {
		for j := range members {
			if members[j].process != members[i].process && caughtUp(j, id) {
				return true
			}
		}
		return false
	}
	owned := make([][]TaskID, len(members))
	for i := range members {
		owned[i] = slices.Clone(members[i].owned)
		slices.SortFunc(owned[i], func(a, b TaskID) int {
			if lagAware {
				if wa, wb := warmElsewhere(i, a), warmElsewhere(i, b); wa != wb {
					if wa {
						return 1
					}
					return -1
				}
			}
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
	// The rest are orphans (no member claims them: their owner left) and
	// tasks released by an owner that keeps too many. They go to members
	// with room in an even plan: below floor, or at floor while extra
	// slots are left. Room is what the plain fewest-tasks rule would give
	// anyway (the slots left equal the tasks left). Among members with
	// room, one whose process keeps a standby of the task comes first,
	// the smallest lag first (it restores only that lag), then the fewest
	// tasks, the fewest of the sub-topology, the first.
	//
	// Lag-aware (the leader keeps standbys), availability comes before
	// balance, as in Kafka Streams' high-availability assignor (KIP-441):
	// an orphan goes to a member with a caught-up standby of it (lag at
	// most acceptableRecoveryLag) even past its even share, and a task
	// released for balance stays with its owner unless a member with room
	// has a caught-up standby of it; that member, the warmup target, gets
	// a standby of the task (assignStandbys), and a later probing
	// rebalance moves the task once it caught up. Nothing waits on a cold
	// restore that a warm copy could avoid.
	room := func(i int) bool {
		return len(assigned[i]) < floor || len(assigned[i]) == floor && extra > 0
	}
	better := func(i, j int, id TaskID) bool {
		if lagAware {
			if ci, cj := caughtUp(i, id), caughtUp(j, id); ci != cj {
				return ci
			}
		}
		if ri, rj := room(i), room(j); ri != rj {
			return ri
		}
		li, wi := members[i].standby[id]
		lj, wj := members[j].standby[id]
		if wi != wj {
			return wi
		}
		if wi && li != lj {
			return li < lj
		}
		if ni, nj := len(assigned[i]), len(assigned[j]); ni != nj {
			return ni < nj
		}
		return subCount[i][id.Subtopology] < subCount[j][id.Subtopology]
	}
	pick := func(id TaskID, roomOnly bool) int {
		best := -1
		for i := range members {
			if members[i].eligible[id.Subtopology] && (!roomOnly || room(i)) && (best < 0 || better(i, best, id)) {
				best = i
			}
		}
		return best
	}
	place := func(i int, id TaskID) {
		if len(assigned[i]) == floor && extra > 0 {
			extra--
		}
		give(i, id)
	}
	out := taskAssignment{assigned: assigned, warmups: make(map[TaskID]int)}
	if lagAware {
		for _, t := range tasks {
			if _, claimed := owner[t.id]; !done[t.id] && !claimed {
				if i := pick(t.id, false); i >= 0 && caughtUp(i, t.id) {
					place(i, t.id)
				}
			}
		}
		for _, t := range tasks {
			o, claimed := owner[t.id]
			if done[t.id] || !claimed || !members[o].eligible[t.id.Subtopology] {
				continue
			}
			// A member of a version without standbys cannot warm up:
			// it takes the task cold, as it would without standbys. A
			// member of the owner's process needs no warmup: the task's
			// database is in the directories they share.
			i := pick(t.id, true)
			if i >= 0 && (caughtUp(i, t.id) || !members[i].capable || members[i].process == members[o].process) {
				place(i, t.id)
				continue
			}
			give(o, t.id)
			if i >= 0 {
				out.warmups[t.id] = i
			}
		}
	}
	for _, t := range tasks {
		if !done[t.id] {
			if i := pick(t.id, false); i >= 0 {
				place(i, t.id)
			}
		}
	}
	for i := range assigned {
		slices.SortFunc(assigned[i], compareTaskIDs)
	}
	// Settled: nothing waits for a warmup and the plan is even. Members
	// that cannot run every sub-topology make evenness a matter of their
	// subscriptions, which probing does not change.
	out.settled = len(out.warmups) == 0
	all := true
	for _, m := range members {
		all = all && !slices.Contains(m.eligible, false)
	}
	if all {
		lo, hi := len(tasks), 0
		for _, a := range assigned {
			lo, hi = min(lo, len(a)), max(hi, len(a))
		}
		out.settled = out.settled && hi-lo <= 1
	}
	return out
}

// acceptableRecoveryLag is the changelog lag (offsets, over the task's
// stores) up to which a standby counts as caught up: a failover to it
// replays at most that. Kafka Streams' acceptable.recovery.lag default.
const acceptableRecoveryLag = 10_000

// taskAssignment is a plan of active tasks: assigned[i] are members[i]'s,
// sorted; warmups maps a task that stays with its owner for now to the
// member that should take it once its standby there caught up; settled
// is false while a probing rebalance could improve the plan.
type taskAssignment struct {
	assigned [][]TaskID
	warmups  map[TaskID]int
	settled  bool
}

// assignStandbys places replicas standby copies of every stateful task,
// given the plan's active tasks per member: standby[i] are members[i]'s,
// sorted. A copy goes to a member that keeps standbys, never in a process
// where the task runs (in this plan, or as claimed by a member that still
// has to revoke it: its database is open there) and at most one per
// process, so a copy is on another machine than the task when processes
// are machines. Fewer than replicas copies exist when too few processes
// qualify. The candidates are ranked: a member whose process already
// keeps the task's standby (it is warm; the smallest lag first), then the
// member with the fewest standbys in this plan, the fewest active tasks,
// the first. A task's warmup target (see assignTasks) gets its first copy
// whatever the ranking. A first pass caps each member at its even share of the
// copies, so that a warm process does not keep them all; a second pass
// places what the cap left out, and a last one moves copies from members
// over the cap to members under it where the rules allow (a greedy pass
// can end with the last tasks' only candidates full).
func assignStandbys(tasks []taskSpec, members []memberState, active [][]TaskID, replicas int, warmups map[TaskID]int) [][]TaskID {
	standby := make([][]TaskID, len(members))
	capable := 0
	for _, m := range members {
		if m.capable {
			capable++
		}
	}
	if replicas <= 0 || capable == 0 {
		return standby
	}
	busy := make(map[string]map[TaskID]bool)
	mark := func(process string, id TaskID) {
		if busy[process] == nil {
			busy[process] = make(map[TaskID]bool)
		}
		busy[process][id] = true
	}
	stateful := 0
	for i, m := range members {
		for _, id := range active[i] {
			mark(m.process, id)
		}
		for _, id := range m.owned {
			mark(m.process, id)
		}
	}
	for _, t := range tasks {
		if t.stateful {
			stateful++
		}
	}
	limit := (stateful*replicas + capable - 1) / capable
	count := make([]int, len(members))
	placed := make(map[TaskID]map[string]bool)
	better := func(i, j int, id TaskID) bool {
		li, wi := members[i].standby[id]
		lj, wj := members[j].standby[id]
		if wi != wj {
			return wi
		}
		if wi && li != lj {
			return li < lj
		}
		if count[i] != count[j] {
			return count[i] < count[j]
		}
		return len(active[i]) < len(active[j])
	}
	can := func(i int, id TaskID) bool {
		m := &members[i]
		return m.capable && m.eligible[id.Subtopology] && !busy[m.process][id] && !placed[id][m.process]
	}
	// A warmup target gets its task's first copy: it is where the task
	// goes next, once the copy caught up.
	for _, t := range tasks {
		i, ok := warmups[t.id]
		if !t.stateful || !ok {
			continue
		}
		if placed[t.id] == nil {
			placed[t.id] = make(map[string]bool)
		}
		if can(i, t.id) {
			standby[i] = append(standby[i], t.id)
			count[i]++
			placed[t.id][members[i].process] = true
		}
	}
	for pass := 0; pass < 2; pass++ {
		for _, t := range tasks {
			if !t.stateful {
				continue
			}
			if placed[t.id] == nil {
				placed[t.id] = make(map[string]bool)
			}
			for len(placed[t.id]) < replicas {
				best := -1
				for i := range members {
					if can(i, t.id) && (pass > 0 || count[i] < limit) && (best < 0 || better(i, best, t.id)) {
						best = i
					}
				}
				if best < 0 {
					break
				}
				standby[best] = append(standby[best], t.id)
				count[best]++
				placed[t.id][members[best].process] = true
			}
		}
	}
	for i := range members {
		for k := 0; k < len(standby[i]) && count[i] > limit; k++ {
			id := standby[i][k]
			if w, ok := warmups[id]; ok && w == i {
				continue
			}
			for j := range members {
				if count[j] >= limit || !can(j, id) {
					continue
				}
				delete(placed[id], members[i].process)
				placed[id][members[j].process] = true
				standby[j] = append(standby[j], id)
				standby[i] = slices.Delete(standby[i], k, k+1)
				count[i]--
				count[j]++
				k--
				break
			}
		}
	}
	for i := range standby {
		slices.SortFunc(standby[i], compareTaskIDs)
	}
	return standby
}
