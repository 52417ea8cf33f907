package eddy_test

import (
	"fmt"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/eddytest"
	"github.com/eddy-streams/eddy/serde"
)

// printSink shows the calls a TransactionalSink gets; a real one prepares
// and commits a database transaction (PREPARE TRANSACTION, COMMIT
// PREPARED) where this one prints.
type printSink struct {
	task string
	rows []string
	seq  int
}

func (s *printSink) Recover(committed []byte) error {
	fmt.Printf("%s: recover, last committed %q\n", s.task, committed)
	return nil
}

func (s *printSink) Write(r eddy.Record[string, string]) error {
	s.rows = append(s.rows, r.Key+"="+r.Value)
	return nil
}

func (s *printSink) Prepare() ([]byte, []eddy.Refusal, error) {
	if len(s.rows) == 0 {
		return nil, nil, nil
	}
	s.seq++
	token := fmt.Sprintf("%s-%d", s.task, s.seq)
	fmt.Printf("prepare %s: %v\n", token, s.rows)
	s.rows = nil
	return []byte(token), nil, nil
}

func (s *printSink) Commit(token []byte) error {
	fmt.Printf("commit %s\n", token)
	return nil
}

func (s *printSink) Abort(token []byte) error {
	s.rows = nil
	fmt.Printf("abort %q\n", token)
	return nil
}

func (s *printSink) Close() error { return nil }

func ExampleToTransactional() {
	topo := eddy.NewTopology()
	orders := eddy.Source(topo, "orders", serde.String(), serde.String())
	eddy.ToTransactional(orders, "orders-db", func(task eddy.SinkTask) (eddy.TransactionalSink[string, string], error) {
		return &printSink{task: task.AppID + "/" + task.Task}, nil
	})

	d, err := eddytest.New(topo, eddytest.Options{Config: eddy.Config{AppID: "shop"}})
	if err != nil {
		panic(err)
	}
	defer d.Close()
	in := eddytest.Input(d, "orders", serde.String(), serde.String())
	err = d.Transaction(func() error { // one Kafka transaction, one sink transaction
		if err := in.Pipe("o1", "3 apples", 1); err != nil {
			return err
		}
		return in.Pipe("o2", "1 pear", 2)
	})
	fmt.Println(err)
	// Output:
	// shop/0_0: recover, last committed ""
	// prepare shop/0_0-1: [o1=3 apples o2=1 pear]
	// commit shop/0_0-1
	// <nil>
}
