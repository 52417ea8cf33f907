package kafka

import (
	"strings"
	"testing"
)

func TestAppACLsCommands(t *testing.T) {
	rules := AppACLs(AppResources{AppID: "ledger", Inputs: []string{"payments"}, Outputs: []string{"balances"}, DeadLetters: []string{"payments.dlq"}})
	var got []string
	for _, r := range rules {
		got = append(got, strings.TrimPrefix(r.KafkaACLsCommand("User:ledger"), "kafka-acls.sh --bootstrap-server BROKER --add --allow-principal User:ledger "))
	}
	want := []string{
		"--operation Read --operation Describe --topic payments",
		"--operation Write --operation Describe --topic balances",
		"--operation Write --operation Describe --operation Create --topic payments.dlq",
		"--operation Read --operation Write --operation Describe --operation Create --operation DescribeConfigs --operation Delete --topic ledger- --resource-pattern-type prefixed",
		"--operation Read --operation Describe --group ledger",
		"--operation Write --operation Describe --transactional-id ledger- --resource-pattern-type prefixed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// CreateTopics adds CREATE on inputs and outputs only.
	with := AppACLs(AppResources{AppID: "ledger", Inputs: []string{"payments"}, Outputs: []string{"balances"}, CreateTopics: true})
	if !strings.Contains(with[0].String(), "CREATE") || !strings.Contains(with[1].String(), "CREATE") {
		t.Fatalf("CreateTopics: %v", with[:2])
	}
}
