// Package kafkaclient holds what an eddy application needs for its own
// Kafka clients beyond eddy.Config: the options that secure the
// connection to the brokers (TLS, mTLS, SASL), with the command-line
// flags that set them, and the creation of the topics the application
// reads and writes, co-partitioned with its input.
//
// The options go to eddy.Config.KafkaOptions and to any franz-go client
// of the same cluster:
//
//	sec := kafkaclient.AddSecurityFlags(flag.CommandLine)
//	flag.Parse()
//	opts, err := sec.ClientOpts() // every flag problem at once
//	...
//	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(brokers...))...)
//	err = kafkaclient.CreateTopics(ctx, cl, 4, "payments")
//	err = kafkaclient.CreateTopicsLike(ctx, cl, "payments", "balances")
//	app, err := eddy.New(topology, eddy.Config{KafkaOptions: opts, ...})
package kafkaclient
