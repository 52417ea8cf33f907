package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy/internal/kafka"
	"github.com/eddy-streams/eddy/internal/testutil"
)

// balancerPlan is a topology of two sub-topologies: sub-topology 0 joins
// "left" and "right" (a two-source task), sub-topology 1 reads "rekey".
func balancerPlan(t *testing.T) *plan {
	t.Helper()
	noop := func(TaskContext) (TaskProcessor, error) { return nil, nil }
	p, err := newPlan("app", Topology{Subtopologies: []Subtopology{
		{Sources: []string{"left", "right"}, Stores: []Store{{Name: "joined"}}, NewTask: noop},
		{Sources: []string{"rekey"}, Stores: []Store{{Name: "counts"}}, NewTask: noop},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// simMember is a group member as the simulated coordinator sees it.
type simMember struct {
	id    string
	owned map[string][]int32
	gen   int32
	// process is the member's instance (its id unless set); lags are
	// the standby tasks it reports, with their lags.
	process string
	lags    map[TaskID]int64
}

// group simulates the cooperative protocol against the balancer: each
// round the leader balances the members' subscriptions; a member that
// lost partitions revokes them and the group rebalances again.
type group struct {
	t       *testing.T
	b       *taskBalancer
	topics  map[string]int32
	members []*simMember
	gen     int32
	// standby are the standby tasks of each member in the last plan.
	standby map[string][]TaskID
}

func newGroup(t *testing.T, partitions int32, ids ...string) *group {
	g := &group{t: t, b: newTaskBalancer(balancerPlan(t)),
		topics: map[string]int32{"left": partitions, "right": partitions, "rekey": partitions}}
	for _, id := range ids {
		g.join(id)
	}
	return g
}

func (g *group) join(id string) {
	g.members = append(g.members, &simMember{id: id, owned: map[string][]int32{}, gen: -1})
	slices.SortFunc(g.members, func(a, b *simMember) int { return cmpString(a.id, b.id) })
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (g *group) leave(id string) {
	g.members = slices.DeleteFunc(g.members, func(m *simMember) bool { return m.id == id })
}

func (g *group) member(id string) *simMember {
	for _, m := range g.members {
		if m.id == id {
			return m
		}
	}
	g.t.Fatalf("no member %s", id)
	return nil
}

// balance runs one join/sync round and returns the plan by member id.
func (g *group) balance() map[string]map[string][]int32 {
	g.t.Helper()
	var jm []kmsg.JoinGroupResponseMember
	for _, m := range g.members {
		id := m.id
		info := memberInfo{Active: g.b.plan.tasksOf(m.owned), Process: m.process}
		if info.Process == "" {
			info.Process = m.id
		}
		for task, lag := range m.lags {
			info.Standby = append(info.Standby, standbyLag{Task: task, Lag: lag})
		}
		jm = append(jm, kmsg.JoinGroupResponseMember{
			MemberID:         id,
			InstanceID:       &id,
			ProtocolMetadata: memberMetadata([]string{"left", "rekey", "right"}, cloneParts(m.owned), m.gen, info),
		})
	}
	mb, _, err := g.b.MemberBalancer(jm)
	if err != nil {
		g.t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(g.topics)
	if err != nil {
		g.t.Fatal(err)
	}
	out := make(map[string]map[string][]int32)
	g.standby = make(map[string][]TaskID)
	for _, a := range into.IntoSyncAssignment() {
		parts, err := g.b.ParseSyncAssignment(a.MemberAssignment)
		if err != nil {
			g.t.Fatal(err)
		}
		out[a.MemberID] = parts
		var ma kmsg.ConsumerMemberAssignment
		if err := ma.ReadFrom(a.MemberAssignment); err != nil {
			g.t.Fatal(err)
		}
		info, err := decodeAssignmentInfo(ma.UserData)
		if err != nil {
			g.t.Fatal(err)
		}
		g.standby[a.MemberID] = info.Standby
	}
	return out
}

func cloneParts(m map[string][]int32) map[string][]int32 {
	c := make(map[string][]int32, len(m))
	for k, v := range m {
		c[k] = slices.Clone(v)
	}
	return c
}

// converge rebalances until no member has to revoke anything, checking on
// every round that no partition moves to a member while another still
// owns it (KIP-429) and that no member gets part of a task. It returns the rounds.
func (g *group) converge() int {
	g.t.Helper()
	for round := 1; round <= 5; round++ {
		plan := g.balance()
		g.gen++
		for _, m := range g.members {
			for topic, parts := range plan[m.id] {
				for _, p := range parts {
					if slices.Contains(m.owned[topic], p) {
						continue // kept, not moved
					}
					for _, other := range g.members {
						if other != m && slices.Contains(other.owned[topic], p) {
							g.t.Fatalf("round %d: %s/%d given to %s while %s still owns it", round, topic, p, m.id, other.id)
						}
					}
				}
			}
			g.checkWhole(round, m.id, plan[m.id])
			g.checkStandbys(round, m, plan)
		}
		revoked := false
		for _, m := range g.members {
			for topic, parts := range m.owned {
				for _, p := range parts {
					if !slices.Contains(plan[m.id][topic], p) {
						revoked = true
					}
				}
			}
			m.owned, m.gen = cloneParts(plan[m.id]), g.gen
		}
		if !revoked {
			return round
		}
	}
	g.t.Fatal("the group did not settle in 5 rounds")
	return 0
}

// checkStandbys fails if m got a standby of a task that runs in its
// process: in the new plan, or still claimed by a member of the process
// that has yet to revoke it.
func (g *group) checkStandbys(round int, m *simMember, plan map[string]map[string][]int32) {
	g.t.Helper()
	proc := func(s *simMember) string {
		if s.process != "" {
			return s.process
		}
		return s.id
	}
	for _, id := range g.standby[m.id] {
		for _, other := range g.members {
			if proc(other) != proc(m) {
				continue
			}
			if slices.Contains(g.b.plan.tasksOf(plan[other.id]), id) || slices.Contains(g.b.plan.tasksOf(other.owned), id) {
				g.t.Fatalf("round %d: %s got a standby of task %s, which runs in its process (member %s)", round, m.id, id, other.id)
			}
		}
	}
}

// checkWhole fails if a member has "left" or "right" of a partition
// without the other: the two sources of one task.
func (g *group) checkWhole(round int, id string, parts map[string][]int32) {
	g.t.Helper()
	for _, p := range parts["left"] {
		if !slices.Contains(parts["right"], p) {
			g.t.Fatalf("round %d: %s has left/%d without right/%d: a two-source task split", round, id, p, p)
		}
	}
	for _, p := range parts["right"] {
		if !slices.Contains(parts["left"], p) {
			g.t.Fatalf("round %d: %s has right/%d without left/%d: a two-source task split", round, id, p, p)
		}
	}
}

// tasks returns the tasks a member owns.
func (g *group) tasks(id string) []TaskID { return g.b.plan.tasksOf(g.member(id).owned) }

// checkEven fails unless every task is owned by one member, members own
// counts within one of each other, and each sub-topology's tasks spread
// within one too.
func (g *group) checkEven() {
	g.t.Helper()
	seen := map[TaskID]string{}
	minN, maxN := 1<<30, 0
	perSub := map[int][]int{}
	for i, m := range g.members {
		ids := g.tasks(m.id)
		minN, maxN = min(minN, len(ids)), max(maxN, len(ids))
		for _, id := range ids {
			if o, dup := seen[id]; dup {
				g.t.Fatalf("task %s owned by %s and %s", id, o, m.id)
			}
			seen[id] = m.id
			if perSub[id.Subtopology] == nil {
				perSub[id.Subtopology] = make([]int, len(g.members))
			}
			perSub[id.Subtopology][i]++
		}
	}
	if want := 2 * int(g.topics["left"]); len(seen) != want {
		g.t.Fatalf("%d of %d tasks owned", len(seen), want)
	}
	if maxN-minN > 1 {
		g.t.Fatalf("uneven: members own %d to %d tasks", minN, maxN)
	}
	for s, counts := range perSub {
		if slices.Max(counts)-slices.Min(counts) > 1 {
			g.t.Fatalf("sub-topology %d spreads unevenly: %v", s, counts)
		}
	}
}

func TestBalancerSpreadsWholeTasksEvenly(t *testing.T) {
	for _, tc := range []struct {
		partitions int32
		members    int
	}{{4, 1}, {4, 3}, {6, 4}, {3, 5}, {8, 2}} {
		t.Run(fmt.Sprintf("%dx%d", tc.partitions, tc.members), func(t *testing.T) {
			var ids []string
			for i := 0; i < tc.members; i++ {
				ids = append(ids, fmt.Sprintf("m%d", i))
			}
			g := newGroup(t, tc.partitions, ids...)
			if rounds := g.converge(); rounds != 1 {
				t.Fatalf("a new group took %d rounds; nothing had to be revoked", rounds)
			}
			g.checkEven()
		})
	}
}

// TestBalancerJoinMovesOnlyWhatItMust: a member joins a group of two;
// the owners keep all but the tasks the newcomer needs, those are revoked
// in a first round and assigned in a second (cooperative), and no task is
// split on the way (checked by converge).
func TestBalancerJoinMovesOnlyWhatItMust(t *testing.T) {
	g := newGroup(t, 6, "a", "b")
	g.converge()
	before := map[string][]TaskID{"a": g.tasks("a"), "b": g.tasks("b")}
	g.join("c")
	if rounds := g.converge(); rounds != 2 {
		t.Fatalf("a join settled in %d rounds, want 2 (revoke, then assign)", rounds)
	}
	g.checkEven()
	moved := 0
	for _, id := range []string{"a", "b"} {
		for _, task := range g.tasks(id) {
			if !slices.Contains(before[id], task) {
				t.Fatalf("%s gained task %s in a join: only the newcomer should gain", id, task)
			}
		}
		moved += len(before[id]) - len(g.tasks(id))
	}
	if got := len(g.tasks("c")); got != moved || got != 4 {
		t.Fatalf("the newcomer owns %d tasks, %d moved; want 4 (12 tasks over 3 members)", got, moved)
	}
}

// TestBalancerLeaveKeepsTheRest: when a member leaves, the others keep
// every task they had and share the leaver's, in one round.
func TestBalancerLeaveKeepsTheRest(t *testing.T) {
	g := newGroup(t, 6, "a", "b", "c")
	g.converge()
	before := map[string][]TaskID{"a": g.tasks("a"), "c": g.tasks("c")}
	g.leave("b")
	if rounds := g.converge(); rounds != 1 {
		t.Fatalf("a leave took %d rounds; nobody had to revoke", rounds)
	}
	g.checkEven()
	for id, had := range before {
		for _, task := range had {
			if !slices.Contains(g.tasks(id), task) {
				t.Fatalf("%s lost task %s when another member left", id, task)
			}
		}
	}
}

// TestBalancerRestartedMemberGetsItsTasksBack: a static member that
// restarts (same instance id, nothing owned) rejoins a group that kept its
// tasks unassigned; it is not sticky to anything, but the others keep
// theirs.
func TestBalancerRestartedMemberGetsItsTasksBack(t *testing.T) {
	g := newGroup(t, 4, "a", "b")
	g.converge()
	a := g.tasks("a")
	g.member("b").owned = map[string][]int32{}
	g.member("b").gen = -1
	g.converge()
	g.checkEven()
	if !slices.Equal(g.tasks("a"), a) {
		t.Fatalf("a's tasks changed from %v to %v when b restarted", a, g.tasks("a"))
	}
}

// TestBalancerStaleClaimLoses: a member that missed rebalances claims a
// task another member owns at a later generation. The later claim keeps
// it; the plan never gives a partition to two members.
func TestBalancerStaleClaimLoses(t *testing.T) {
	g := newGroup(t, 2, "a", "b")
	g.converge()
	taskOfB := g.tasks("b")[0]
	stale := g.member("a")
	for _, src := range g.b.plan.subs[taskOfB.Subtopology].Sources {
		stale.owned[src] = append(stale.owned[src], taskOfB.Partition)
	}
	stale.gen = g.gen - 1
	g.converge()
	g.checkEven()
	if !slices.Contains(g.tasks("b"), taskOfB) {
		t.Fatalf("b lost task %s to a stale claim; b has %v", taskOfB, g.tasks("b"))
	}
}

// TestBalancerHealsASplitTask: a task split between two members (left on
// one, right on the other, as another balancer could leave a group) is
// revoked from both and assigned whole.
func TestBalancerHealsASplitTask(t *testing.T) {
	g := newGroup(t, 1, "a", "b")
	g.member("a").owned = map[string][]int32{"left": {0}}
	g.member("b").owned = map[string][]int32{"right": {0}, "rekey": {0}}
	g.member("a").gen, g.member("b").gen = 3, 3
	g.gen = 3
	plan := g.balance()
	for id, parts := range plan {
		g.checkWhole(1, id, parts)
	}
	g.converge()
	g.checkEven()
}

func TestBalancerIsDeterministic(t *testing.T) {
	g := newGroup(t, 5, "a", "b", "c")
	g.converge()
	g.join("d")
	first := g.balance()
	for i := 0; i < 5; i++ {
		again := g.balance()
		for id := range first {
			if !maps.EqualFunc(first[id], again[id], slices.Equal) {
				t.Fatalf("plan for %s changed between identical rounds: %v, then %v", id, first[id], again[id])
			}
		}
	}
}

// TestBalancerSkipsMembersWithoutTheTopics: a member that does not
// subscribe to a sub-topology's sources (another version of the
// application) gets none of its tasks.
func TestBalancerSkipsMembersWithoutTheTopics(t *testing.T) {
	p := balancerPlan(t)
	tasks := p.tasks(map[string]int32{"left": 2, "right": 2, "rekey": 2})
	members := []memberState{
		{id: "a", eligible: []bool{true, true}},
		{id: "b", eligible: []bool{false, true}},
	}
	got := assignTasks(tasks, members, false).assigned
	for _, id := range got[1] {
		if id.Subtopology == 0 {
			t.Fatalf("b got task %s of a sub-topology it does not subscribe to: %v", id, got)
		}
	}
	if len(got[0])+len(got[1]) != 4 {
		t.Fatalf("not every task assigned: %v", got)
	}
}

// TestBalancersOfferStickyOnlyForSingleSourceTasks: the fallback protocol
// for upgrades from cooperative-sticky would split a two-source task.
func TestBalancersOfferStickyOnlyForSingleSourceTasks(t *testing.T) {
	names := func(bs []kgo.GroupBalancer) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.ProtocolName())
		}
		return out
	}
	w := &worker{plan: balancerPlan(t)}
	if got := names(w.balancers()); !slices.Equal(got, []string{taskProtocol}) {
		t.Fatalf("two-source topology offers %v", got)
	}
	p, err := newPlan("app", counting())
	if err != nil {
		t.Fatal(err)
	}
	w = &worker{plan: p}
	if got := names(w.balancers()); !slices.Equal(got, []string{taskProtocol, "cooperative-sticky"}) {
		t.Fatalf("single-source topology offers %v", got)
	}
}

// joining counts records per key over two co-partitioned sources, "left"
// and "right": one two-source task per partition.
func joining() Topology {
	topo := counting()
	topo.Subtopologies[0].Sources = []string{"left", "right"}
	return topo
}

// TestTwoSourceTasksMoveBetweenInstances runs a two-source sub-topology on
// three instances that join and leave while records flow. The group must
// use the task balancer, never split a task between members, and the
// output must be exact.
func TestTwoSourceTasksMoveBetweenInstances(t *testing.T) {
	h := newHarness(t)
	h.createTopics(kafka.TopicSpec{Name: "left", Partitions: 4}, kafka.TopicSpec{Name: "right", Partitions: 4})
	keyOf := map[string]string{}
	n := 0
	produce := func(count int) {
		var recs []*kgo.Record
		for i := 0; i < count; i++ {
			k := fmt.Sprintf("k%d", n%7)
			for _, side := range []string{"left", "right"} {
				v := fmt.Sprintf("%s%d", side[:1], n)
				keyOf[v] = k
				recs = append(recs, &kgo.Record{Topic: side, Key: []byte(k), Value: []byte(v)})
			}
			n++
		}
		h.produceRecords(recs...)
	}
	logs := map[string]*testutil.LogBuffer{}
	start := func(id string) func() {
		logs[id] = new(testutil.LogBuffer)
		cfg := h.config(t.TempDir(), logs[id])
		cfg.InstanceID = id
		return h.runTopo(cfg, joining())
	}
	stopA := start("a")
	defer stopA()
	waitLog(t, logs["a"], "task assigned", 4)
	produce(50)
	stopB := start("b")
	produce(50)
	stopC := start("c")
	produce(50)
	waitLog(t, logs["b"], "task assigned", 1)
	waitLog(t, logs["c"], "task assigned", 1)
	h.waitOutputs(2 * n)
	h.checkWholeTasks("count", 3)
	stopB()
	produce(50)
	h.waitOutputs(2 * n)
	stopC()
	produce(50)
	outs := h.waitOutputs(2 * n)
	checkPermuted(t, outs, keyOf)
	if moved := strings.Count(logs["a"].String(), "task revoked"); moved == 0 {
		t.Fatal("no task ever left instance a: the scenario did not move tasks")
	}
	for id, l := range logs {
		if strings.Contains(l.String(), "no task for") {
			t.Fatalf("instance %s polled a partition it had no task for:\n%s", id, l.String())
		}
	}
}

// checkWholeTasks waits for the group to be stable with members members,
// each assigned something, and fails if a member has partition p of
// "left" without partition p of "right" or the other way round.
func (h *harness) checkWholeTasks(group string, members int) {
	h.t.Helper()
	cl := h.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		groups, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			h.t.Fatal(err)
		}
		g := groups[group]
		assigned := map[string]map[string][]int32{}
		for _, m := range g.Members {
			c, ok := m.Assigned.AsConsumer()
			if !ok || len(c.Topics) == 0 {
				continue
			}
			assigned[m.MemberID] = map[string][]int32{}
			for _, tp := range c.Topics {
				assigned[m.MemberID][tp.Topic] = tp.Partitions
			}
		}
		if g.State == "Stable" && len(assigned) == members {
			if g.Protocol != taskProtocol {
				h.t.Fatalf("the group balances with %q, want %q", g.Protocol, taskProtocol)
			}
			for id, parts := range assigned {
				l, r := slices.Sorted(slices.Values(parts["left"])), slices.Sorted(slices.Values(parts["right"]))
				if !slices.Equal(l, r) {
					h.t.Fatalf("member %s has left%v and right%v: a task is split", id, l, r)
				}
			}
			return
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("the group never settled with %d members: state %s, %d assigned", members, g.State, len(assigned))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitProtocol waits until group is stable with protocol.
func (h *harness) waitProtocol(group, protocol string) {
	h.t.Helper()
	cl := h.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		groups, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			h.t.Fatal(err)
		}
		if g := groups[group]; g.State == "Stable" && g.Protocol == protocol {
			return
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("group %s never became stable with protocol %s: %+v", group, protocol, groups[group])
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestUpgradeFromCooperativeSticky: a member of the version before the
// task balancer offers only cooperative-sticky. A worker of this version
// (single-source tasks) joins its group on that protocol, and the group
// switches to the task balancer once the old member left; records
// produced after the switch come out exactly once.
func TestUpgradeFromCooperativeSticky(t *testing.T) {
	h := newHarness(t)
	old := h.client(kgo.ConsumerGroup("count"), kgo.ConsumeTopics("in"), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	h.waitProtocol("count", "cooperative-sticky")
	var log testutil.LogBuffer
	stop := h.run(h.config(t.TempDir(), &log))
	defer stop()
	waitLog(t, &log, "task assigned", 1)
	h.waitProtocol("count", "cooperative-sticky")
	old.Close() // leaves the group
	waitLog(t, &log, "task assigned", 2)
	h.waitProtocol("count", taskProtocol)
	h.produce(0, 50)
	if e := check(h.waitOutputs(50), 50); !e.ok() {
		t.Fatalf("%+v", e)
	}
}
