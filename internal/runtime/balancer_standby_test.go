package runtime

import (
	"fmt"
	"slices"
	"testing"
)

// TestAssignTasksPrefersCaughtUpStandby: tasks whose owner left go to the
// member whose process keeps the most caught-up standby of them, among the
// members with room in an even plan; without standbys the same group gets
// the plain fewest-tasks plan, which differs, so the lags decided.
func TestAssignTasksPrefersCaughtUpStandby(t *testing.T) {
	p := balancerPlan(t)
	tasks := p.tasks(map[string]int32{"left": 3, "right": 3, "rekey": 3})
	both := []bool{true, true}
	// b, c and d survive a; a's tasks 0_2 and 1_2 must move.
	members := []memberState{
		{id: "b", eligible: both, owned: []TaskID{{0, 0}, {1, 0}}},
		{id: "c", eligible: both, owned: []TaskID{{0, 1}}},
		{id: "d", eligible: both, owned: []TaskID{{1, 1}}},
	}
	plain := assignTasks(tasks, members, false).assigned
	if !slices.Contains(plain[2], TaskID{0, 2}) || !slices.Contains(plain[1], TaskID{1, 2}) {
		t.Fatalf("without standbys: %v; the test expects 0_2 on d and 1_2 on c", plain)
	}
	members[0].standby = map[TaskID]int64{{1, 2}: 0}                  // caught up, but b is full
	members[1].standby = map[TaskID]int64{{0, 2}: 3, {1, 2}: 5}       // nearly caught up
	members[2].standby = map[TaskID]int64{{0, 2}: 500, {1, 2}: 10000} // behind
	got := assignTasks(tasks, members, false).assigned
	want := [][]TaskID{{{0, 0}, {1, 0}}, {{0, 1}, {0, 2}}, {{1, 1}, {1, 2}}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("with standbys: %v, want %v (0_2 to c, lag 3 < 500; then c is full, 1_2 to d)", got, want)
		}
	}
	// A standby at any lag beats none.
	members[0].standby, members[1].standby, members[2].standby = nil, map[TaskID]int64{{0, 2}: 1 << 40}, nil
	got = assignTasks(tasks, members, false).assigned
	if !slices.Contains(got[1], TaskID{0, 2}) || !slices.Contains(got[2], TaskID{1, 2}) {
		t.Fatalf("%v: 0_2 should go to c, which keeps a standby of it far behind, 1_2 to d", got)
	}
}

// sortedTasks is a member's standbys with a process name, for
// assignStandbys tests: members[i] in process procs[i] running active[i].
func standbyMembers(procs []string, active [][]TaskID) []memberState {
	var ms []memberState
	for i, p := range procs {
		ms = append(ms, memberState{id: fmt.Sprintf("%s-%d", p, i), process: p, capable: true, eligible: []bool{true, true}, owned: active[i]})
	}
	return ms
}

// checkStandbyPlan fails unless every stateful task has want standbys,
// each in a different process from the others and from the task's.
func checkStandbyPlan(t *testing.T, tasks []taskSpec, members []memberState, active, standby [][]TaskID, want int) {
	t.Helper()
	procs := map[TaskID][]string{}
	for i, ids := range standby {
		for _, id := range ids {
			procs[id] = append(procs[id], members[i].process)
		}
	}
	for i, ids := range active {
		for _, id := range ids {
			if slices.Contains(procs[id], members[i].process) {
				t.Fatalf("task %s has a standby in process %s, which runs it: %v", id, members[i].process, standby)
			}
		}
	}
	for _, task := range tasks {
		ps := procs[task.id]
		if !task.stateful {
			if len(ps) > 0 {
				t.Fatalf("stateless task %s got standbys in %v", task.id, ps)
			}
			continue
		}
		if len(ps) != want {
			t.Fatalf("task %s has standbys in %v, want %d", task.id, ps, want)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(ps)))) != len(ps) {
			t.Fatalf("task %s has two standbys in one process: %v", task.id, ps)
		}
	}
}

func TestAssignStandbys(t *testing.T) {
	p := balancerPlan(t)
	tasks := p.tasks(map[string]int32{"left": 4, "right": 4, "rekey": 4})
	t.Run("N per task, spread", func(t *testing.T) {
		procs := []string{"a", "b", "c", "d"}
		members := standbyMembers(procs, make([][]TaskID, 4))
		active := assignTasks(tasks, members, false).assigned
		standby := assignStandbys(tasks, members, active, 2, nil)
		checkStandbyPlan(t, tasks, members, active, standby, 2)
		for i := range standby {
			if n := len(standby[i]); n != 4 {
				t.Fatalf("member %d keeps %d standbys, want 4 (16 copies over 4 members): %v", i, n, standby)
			}
		}
	})
	t.Run("fewer processes than replicas", func(t *testing.T) {
		members := standbyMembers([]string{"a", "b"}, make([][]TaskID, 2))
		active := assignTasks(tasks, members, false).assigned
		standby := assignStandbys(tasks, members, active, 3, nil)
		checkStandbyPlan(t, tasks, members, active, standby, 1)
	})
	t.Run("workers of one process", func(t *testing.T) {
		// Two workers of process a and one of b: a's workers never keep
		// standbys of each other's tasks (they share the task directories).
		members := standbyMembers([]string{"a", "a", "b"}, make([][]TaskID, 3))
		active := assignTasks(tasks, members, false).assigned
		standby := assignStandbys(tasks, members, active, 1, nil)
		checkStandbyPlan(t, tasks, members, active, standby, 1)
	})
	t.Run("a claimed task", func(t *testing.T) {
		// b still claims 0_0 (to be revoked this round, assigned to nobody
		// yet): its database is open in b, which must not get a standby.
		members := standbyMembers([]string{"a", "b", "c"}, [][]TaskID{nil, {{0, 0}}, nil})
		active := [][]TaskID{{{1, 0}}, nil, nil}
		standby := assignStandbys(tasks, members, active, 2, nil)
		for i, ids := range standby {
			if members[i].process == "b" && slices.Contains(ids, TaskID{0, 0}) {
				t.Fatalf("b keeps a standby of the task it still runs: %v", standby)
			}
		}
	})
	t.Run("warm standbys stay", func(t *testing.T) {
		members := standbyMembers([]string{"a", "b", "c"}, make([][]TaskID, 3))
		active := assignTasks(tasks, members, false).assigned
		first := assignStandbys(tasks, members, active, 1, nil)
		for i := range members {
			members[i].standby = map[TaskID]int64{}
			for _, id := range first[i] {
				members[i].standby[id] = 0
			}
		}
		// A fresh plan would place them the same way anyway, so move one:
		// member to reports a standby that the plan gave member from.
		from, to, moved := -1, -1, TaskID{}
		for i := range members {
			for j := range members {
				for _, id := range first[i] {
					if i != j && from < 0 && !slices.Contains(active[j], id) {
						from, to, moved = i, j, id
					}
				}
			}
		}
		if from < 0 {
			t.Fatalf("no standby that another member could keep: %v (active %v)", first, active)
		}
		delete(members[from].standby, moved)
		members[to].standby[moved] = 7
		again := assignStandbys(tasks, members, active, 1, nil)
		if !slices.Contains(again[to], moved) {
			t.Fatalf("member %d keeps a standby of %s but the plan moved it: %v", to, moved, again)
		}
		checkStandbyPlan(t, tasks, members, active, again, 1)
	})
	t.Run("not capable", func(t *testing.T) {
		members := standbyMembers([]string{"a", "b"}, make([][]TaskID, 2))
		members[1].capable = false
		active := assignTasks(tasks, members, false).assigned
		standby := assignStandbys(tasks, members, active, 1, nil)
		if len(standby[1]) != 0 || len(standby[0]) != len(active[1]) {
			t.Fatalf("standbys %v: want b's tasks on a, none on b (an older version)", standby)
		}
	})
}

// reportStandbys makes every member report the standbys of the last plan
// with lag.
func (g *group) reportStandbys(lag int64) {
	for _, m := range g.members {
		m.lags = map[TaskID]int64{}
		for _, id := range g.standby[m.id] {
			m.lags[id] = lag
		}
	}
}

// TestAssignTasksLagAware: with standbys, an orphan goes to a caught-up
// standby even past its member's even share; a task an owner releases for
// balance moves only to a member with a caught-up standby of it, and
// otherwise stays, with the member that should take it as warmup target.
func TestAssignTasksLagAware(t *testing.T) {
	p := balancerPlan(t)
	tasks := p.tasks(map[string]int32{"left": 2, "right": 2, "rekey": 2})
	both := []bool{true, true}
	// 4 tasks, 2 members: 2 each. b owns 2; a's 0_1 and 1_1 are orphans.
	members := []memberState{
		{id: "b", process: "b", eligible: both, capable: true, owned: []TaskID{{0, 0}, {1, 0}}, standby: map[TaskID]int64{{0, 1}: 0, {1, 1}: acceptableRecoveryLag}},
		{id: "c", process: "c", eligible: both, capable: true},
	}
	got := assignTasks(tasks, members, true)
	if !slices.Equal(got.assigned[0], []TaskID{{0, 0}, {0, 1}, {1, 0}, {1, 1}}) || got.settled {
		t.Fatalf("orphans with caught-up standbys on b: %+v; want all on b, unsettled", got)
	}
	members[0].standby[TaskID{1, 1}] = acceptableRecoveryLag + 1
	got = assignTasks(tasks, members, true)
	if !slices.Equal(got.assigned[0], []TaskID{{0, 0}, {0, 1}, {1, 0}}) || !slices.Equal(got.assigned[1], []TaskID{{1, 1}}) {
		t.Fatalf("a standby past the acceptable lag is not caught up: %+v", got)
	}

	// c joins a group where b owns everything: nothing moves cold.
	members[0].owned, members[0].standby = []TaskID{{0, 0}, {0, 1}, {1, 0}, {1, 1}}, nil
	got = assignTasks(tasks, members, true)
	if len(got.assigned[1]) != 0 || len(got.warmups) != 2 || got.settled {
		t.Fatalf("c has no standby yet: %+v; want b to keep all, 2 warmups for c, unsettled", got)
	}
	for id, i := range got.warmups {
		if i != 1 {
			t.Fatalf("warmup of %s on member %d, want c", id, i)
		}
	}
	// Once c's warmups caught up, they move.
	members[1].standby = map[TaskID]int64{}
	for id := range got.warmups {
		members[1].standby[id] = 3
	}
	again := assignTasks(tasks, members, true)
	if len(again.assigned[1]) != 2 || len(again.warmups) != 0 || !again.settled {
		t.Fatalf("c's warmups caught up: %+v; want 2 tasks on c, settled", again)
	}
	for id := range got.warmups {
		if !slices.Contains(again.assigned[1], id) {
			t.Fatalf("c got %v, want its warm %v", again.assigned[1], got.warmups)
		}
	}
	// An owner gives up first the tasks another process keeps a caught-up
	// standby of: c has one of 0_0, which b would otherwise keep (it comes
	// first), so 0_0 moves warm and only one task waits for a warmup.
	members[1].standby = map[TaskID]int64{{0, 0}: 0}
	got = assignTasks(tasks, members, true)
	if !slices.Equal(got.assigned[1], []TaskID{{0, 0}}) || len(got.warmups) != 1 || got.settled {
		t.Fatalf("c keeps a caught-up standby of 0_0: %+v; want 0_0 on c, one warmup, unsettled", got)
	}

	// A worker of b's own process shares its task directories: it takes
	// its share at once.
	members[1].standby, members[1].process = nil, "b"
	got = assignTasks(tasks, members, true)
	if len(got.assigned[1]) != 2 || len(got.warmups) != 0 || !got.settled {
		t.Fatalf("c is a worker of b's process: %+v; want 2 tasks on c at once", got)
	}
	members[1].process = "c"
	// A member of a version without standbys could never warm up: it
	// takes its share cold.
	members[1].capable, members[1].standby = false, nil
	got = assignTasks(tasks, members, true)
	if len(got.assigned[1]) != 2 || len(got.warmups) != 0 || !got.settled {
		t.Fatalf("c keeps no standbys: %+v; want 2 tasks on c at once", got)
	}
}

// TestBalancerWarmsUpBeforeMoving runs the group protocol with one standby
// per task: standbys never land in a task's process (checked on every
// round, cooperative ones included); a joining member first gets warmups
// and takes tasks only once they caught up; a leaving member's tasks all
// go to the members that kept their caught-up standbys, and probing
// rebalances even the plan out again.
func TestBalancerWarmsUpBeforeMoving(t *testing.T) {
	g := newGroup(t, 6, "a", "b")
	g.b.replicas = 1
	probes := 0
	g.b.probe = func() { probes++ }
	g.converge()
	g.reportStandbys(0)
	if rounds := g.converge(); rounds != 1 {
		t.Fatalf("a settled group took %d rounds", rounds)
	}
	g.checkEven()

	before := map[string][]TaskID{"a": g.tasks("a"), "b": g.tasks("b")}
	g.join("c")
	g.converge()
	if len(g.tasks("c")) != 0 || len(g.standby["c"]) == 0 || probes == 0 {
		t.Fatalf("c joined cold: it got tasks %v and warmups %v (probes %d); want no task, warmups, a probe", g.tasks("c"), g.standby["c"], probes)
	}
	for id, had := range before {
		if !slices.Equal(g.tasks(id), had) {
			t.Fatalf("%s's tasks changed from %v to %v before c warmed up", id, had, g.tasks(id))
		}
	}
	warm := slices.Clone(g.standby["c"])
	g.reportStandbys(0)
	if rounds := g.converge(); rounds != 2 {
		t.Fatalf("moving warm tasks to c took %d rounds, want 2 (revoke, then assign)", rounds)
	}
	for _, id := range g.tasks("c") {
		if !slices.Contains(warm, id) {
			t.Fatalf("c got %s, which it had no warm standby of (%v)", id, warm)
		}
	}
	for i := 0; i < 5 && len(g.tasks("c")) < 4; i++ {
		g.reportStandbys(0)
		g.converge()
	}
	g.checkEven()

	g.reportStandbys(0)
	g.converge()
	holder := map[TaskID]string{}
	for id, ids := range g.standby {
		for _, task := range ids {
			holder[task] = id
		}
	}
	lost := g.tasks("a")
	g.reportStandbys(0)
	g.leave("a")
	if rounds := g.converge(); rounds != 1 {
		t.Fatalf("a leave took %d rounds", rounds)
	}
	for _, task := range lost {
		if !slices.Contains(g.tasks(holder[task]), task) {
			t.Fatalf("a's task %s went elsewhere than %s, which kept its caught-up standby (b %v, c %v)", task, holder[task], g.tasks("b"), g.tasks("c"))
		}
	}
	for i := 0; i < 5; i++ {
		g.reportStandbys(0)
		g.converge()
	}
	g.checkEven()
}
